package grpcapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
)

// grpcurlBin finds grpcurl on PATH, then in <repo>/.tools/bin (.ci/tools.sh installs it
// there); missing, the test is skipped, or fails when LOAM_REQUIRE_SERVERS=1.
func grpcurlBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", ".tools", "bin", "grpcurl")
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p
	}
	msg := "grpcurl not found on PATH or in .tools/bin: run .ci/tools.sh"
	if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg + " [LOAM_REQUIRE_SERVERS=1]")
	}
	t.Skip(msg)
	return ""
}

// TestGrpcurl drives the node with the real grpcurl through reflection, with the
// commands docs/grpc-api.md shows.
func TestGrpcurl(t *testing.T) {
	bin := grpcurlBin(t)
	e := start(t, httpapi.Limits{})
	// run runs grpcurl -plaintext with args, ADDR standing for the node's address.
	run := func(args ...string) string {
		t.Helper()
		for i, a := range args {
			if a == "ADDR" {
				args[i] = e.grpc
			}
		}
		out, err := exec.Command(bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list, err := exec.Command(bin, "-plaintext", e.grpc, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, list)
	}
	for _, svc := range []string{"loam.v1.StreamService", "loam.v1.RecordService", "loam.v1.ProducerService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(string(list), svc+"\n") {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, list)
		}
	}
	if out := run("ADDR", "describe", "loam.v1.RecordService"); !strings.Contains(out, "rpc Subscribe ( .loam.v1.SubscribeRequest ) returns ( stream .loam.v1.SubscribeResponse )") {
		t.Errorf("describe:\n%s", out)
	}
	if out := run("-d", `{"service": "loam.v1.RecordService"}`, "ADDR", "grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Errorf("health:\n%s", out)
	}
	if out := run("-d", `{"namespace": "default", "name": "orders", "partitions": 2}`, "ADDR", "loam.v1.StreamService/CreateStream"); !strings.Contains(out, `"name": "orders"`) {
		t.Errorf("create:\n%s", out)
	}
	// bytes fields are base64 in grpcurl's JSON: "eyJpZCI6MX0=" is {"id":1}.
	out := run("-d", `{"namespace": "default", "stream": "orders", "records": [{"key": "dXNlci03", "value": "eyJpZCI6MX0=", "headers": [{"key": "source", "value": "Y2xp"}], "partition": 1}]}`,
		"ADDR", "loam.v1.RecordService/Produce")
	if !strings.Contains(out, `"partition": 1`) || !strings.Contains(out, `"token": "v1.`) {
		t.Errorf("produce:\n%s", out)
	}
	out = run("-d", `{"namespace": "default", "stream": "orders", "partition": 1, "offset": "0"}`, "ADDR", "loam.v1.RecordService/Fetch")
	if !strings.Contains(out, `"value": "eyJpZCI6MX0="`) || !strings.Contains(out, `"nextOffset": "1"`) {
		t.Errorf("fetch:\n%s", out)
	}
	// Subscribe streams until grpcurl's deadline cuts it.
	cmd := exec.Command(bin, "-plaintext", "-max-time", "1", "-d", `{"namespace": "default", "stream": "orders", "partition": 1}`, e.grpc, "loam.v1.RecordService/Subscribe")
	sub, _ := cmd.CombinedOutput()
	if !strings.Contains(string(sub), `"value": "eyJpZCI6MX0="`) {
		t.Errorf("subscribe:\n%s", sub)
	}
	// An error shows its code and ErrorInfo.
	bad, err := exec.Command(bin, "-plaintext", "-d", `{"namespace": "default", "stream": "nope"}`, e.grpc, "loam.v1.RecordService/Fetch").CombinedOutput()
	if err == nil || !strings.Contains(string(bad), "NotFound") || !strings.Contains(string(bad), "stream_not_found") {
		t.Errorf("fetch of a missing stream: %v\n%s", err, bad)
	}
}

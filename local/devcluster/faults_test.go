package devcluster

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// TestFaultProfile: Config.FaultProfile (loam dev --fault-profile) breaks bucket calls as
// the profile says, produce still succeeds through the write path's retries, the counters
// are on the node's /metrics, and a rewritten file takes effect.
func TestFaultProfile(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`{"seed": 1, "rules": [{"op": "put", "fault": "slowdown", "p": 0.5, "prefix": "wal/"},
	  {"op": "put", "fault": "lost_answer", "p": 0.3, "prefix": "wal/"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(ctx, Config{DataDir: t.TempDir(), FaultProfile: filepath.Join(t.TempDir(), "none.json")}); err == nil {
		t.Fatal("a missing profile started")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPListener: ln, FlushInterval: 5 * time.Millisecond,
		SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), FaultProfile: file,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	cl, _ := streamapi.NewClient("http://" + c.HTTPAddr())
	if _, err := cl.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "f"}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		resp, err := cl.Produce(ctx, "default", "f", []streamapi.Record{{Value: json.RawMessage(`"x"`)}})
		if err != nil || resp.Offsets[0].Offset != int64(i) {
			t.Fatalf("produce %d: %+v %v", i, resp, err)
		}
	}
	if c.Faults().Count("put", "slowdown") == 0 || c.Faults().Count("put", "lost_answer") == 0 {
		t.Fatalf("faults did not fire: %v", c.Faults().Counts())
	}
	res, err := http.Get("http://" + c.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `loam_objstore_faults_injected_total{fault="slowdown",op="put"}`) {
		t.Fatalf("no fault counters on /metrics")
	}
	if err := os.WriteFile(file, []byte(`{"rules": [{"op": "put", "fault": "reset"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.Faults().Count("put", "reset") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the rewritten profile never took effect")
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		cl.Produce(cctx, "default", "f", []streamapi.Record{{Value: json.RawMessage(`"y"`)}})
		cancel()
	}
}

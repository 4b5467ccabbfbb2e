package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/streamapi"
)

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	return b.String()
}

// TestConsumerDeleteReset: loam consumer reset and delete are refused while a member is
// live (exit 1, consumer_active) unless --force; reset moves the committed offsets to the
// target asked, per partition or all; bad flags are usage errors; delete removes it.
func TestConsumerDeleteReset(t *testing.T) {
	e := realEnv(t)
	e.must("", "stream", "create", "s", "--partitions", "2")
	e.must("a\nb\nc\n", "produce", "s", "--partition", "0")
	// A member that stays live (a long session, never leaving).
	c, err := streamapi.NewClient(e.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(t.Context(), "default", "app", streamapi.HeartbeatRequest{Stream: "s", Member: "m1", SessionMs: 60000}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		code int
		says string
	}{
		{"consumer reset app --stream s --to-earliest", 1, "consumer_active"},
		{"consumer delete app", 1, "consumer_active"},
		{"consumer reset app --stream s", 2, "exactly one of"},
		{"consumer reset app --stream s --to-earliest --to-latest", 2, "exactly one of"},
		{"consumer reset app --to-latest", 2, "--stream is required"},
		{"consumer reset app --stream s --to-offset -3", 2, "want an offset"},
		{"consumer reset app --stream s --to-timestamp yesterday", 2, "RFC 3339"},
		{"consumer reset app --stream s --partition x --to-latest", 2, "partition"},
		{"consumer reset app --stream s --partition 5 --to-latest --force", 1, "partition_not_found"},
	} {
		r := e.loam("", args(tc.args)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Fatalf("%s: exit %d, stderr %q; want %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.says)
		}
	}
	r := e.loam("", args("consumer reset app --stream s --to-offset 2 --partition 0 --force")...)
	if r.code != 0 || !strings.Contains(r.stdout, "s       0          2") {
		t.Fatalf("forced reset:\n%s\n%s", r.stdout, r.stderr)
	}
	for _, tc := range []struct{ args, want string }{
		{"consumer reset app --stream s --to-latest --json", `{"offsets":[{"partition":0,"offset":3},{"partition":1,"offset":0}]}`},
		{"consumer reset app --stream s --to-earliest --partition 0 --json", `{"offsets":[{"partition":0,"offset":0}]}`},
		{"consumer reset app --stream s --to-timestamp 2000-01-01T00:00:00Z --json", `{"offsets":[{"partition":0,"offset":0},{"partition":1,"offset":0}]}`},
		{"consumer reset app --stream s --to-timestamp 99999999999999 --json", `{"offsets":[{"partition":0,"offset":3},{"partition":1,"offset":0}]}`},
	} {
		if got := compact(t, e.must("", args(tc.args)...)); got != tc.want {
			t.Fatalf("%s:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
	if got := e.must("", "consume", "s", "--consumer", "app", "--max", "3", "--session", "1s"); got != "" {
		t.Fatalf("after a reset to latest the consumer read %q", got)
	}
	e.must("", args("consumer reset app --stream s --to-earliest --partition 0")...)
	if got := e.must("", "consume", "s", "--consumer", "app", "--max", "3"); got != "a\nb\nc\n" {
		t.Fatalf("after a reset to earliest the consumer read %q", got)
	}
	if out := e.must("", "consumer", "delete", "app"); !strings.Contains(out, "deleted consumer app") {
		t.Fatalf("delete: %q", out)
	}
	if r := e.loam("", "consumer", "describe", "app"); r.code != 1 || !strings.Contains(r.stderr, "consumer_not_found") {
		t.Fatalf("describe after delete: %+v", r)
	}
}

// TestQuotaCommands: loam quota set and get over the admin API, with units, none and bad
// input.
func TestQuotaCommands(t *testing.T) {
	e := realEnv(t)
	for _, tc := range []struct{ args, want string }{
		{"quota get", "namespace default: no ingest quota\n"},
		{"quota set 10M", "namespace default: ingest quota 10485760 bytes/s (10 MiB/s)\n"},
		{"quota get", "namespace default: ingest quota 10485760 bytes/s (10 MiB/s)\n"},
		{"quota set 1536", "namespace default: ingest quota 1536 bytes/s (1.5 KiB/s)\n"},
		{"quota get --json", "{\n  \"namespace\": \"default\",\n  \"ingest_bytes_per_sec\": 1536\n}\n"},
		{"quota set none", "namespace default: no ingest quota\n"},
	} {
		if got := e.must("", args(tc.args)...); got != tc.want {
			t.Fatalf("%s:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args string
		code int
		says string
	}{
		{"quota set", 2, "BYTES_PER_SEC"},
		{"quota set ten", 2, "want a byte rate"},
		{"quota set -- -5", 2, "want a byte rate"},
		{"quota", 2, "get or set"},
		{"quota get --namespace nosuch", 1, "namespace_not_found"},
	} {
		r := e.loam("", args(tc.args)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Fatalf("%s: exit %d, stderr %q; want %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.says)
		}
	}
}

package fnenv

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/notify"
)

// TestSampleEvents: each function's event.json is what its trigger sends, and routes.
func TestSampleEvents(t *testing.T) {
	for name, want := range map[string]notify.Kind{"segmenter": notify.KindSQS, "retention": notify.KindSchedule,
		"compaction": notify.KindSchedule, "gc": notify.KindSchedule} {
		b, err := os.ReadFile(filepath.Join("..", "..", name, "event.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := notify.Classify(b); got != want {
			t.Errorf("%s/event.json: kind %v, want %v", name, got, want)
		}
	}
	b, _ := os.ReadFile(filepath.Join("..", "..", "segmenter", "event.json"))
	var ev struct {
		Records []struct{ Body string } `json:"Records"`
	}
	if err := json.Unmarshal(b, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatal(err)
	}
	s3, err := notify.S3EventFromBody(ev.Records[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := notify.Objects(s3)
	if err != nil || len(objs) != 1 || !objs[0].Created() || objs[0].Key != "wal/standard/lognode-a/01JBZ8Y4Q7X9W2V3T5R6P8N0MK.wal" {
		t.Fatalf("%+v %v", objs, err)
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1024": 1024, "64KiB": 64 << 10, "128 MiB": 128 << 20, "1GiB": 1 << 30, "2MB": 2 << 20, "5B": 5} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("%q: %d %v", s, got, err)
		}
	}
	for _, s := range []string{"", "x", "-1", "1.5MiB", "99999999999GiB"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
	t.Setenv("X_D", "90s")
	if d, err := Duration("X_D", time.Second); err != nil || d != 90*time.Second {
		t.Fatal(d, err)
	}
	t.Setenv("X_D", "soon")
	if _, err := Duration("X_D", 0); !errors.Is(err, ErrEnv) {
		t.Fatal(err)
	}
	if d, _ := Duration("X_UNSET", 7); d != 7 {
		t.Fatal(d)
	}
	t.Setenv("LOAM_BUCKET", "")
	if _, err := Load(t.Context(), false); !errors.Is(err, ErrEnv) {
		t.Fatal(err)
	}
	t.Setenv("LOAM_BUCKET", "mem://")
	t.Setenv("LOAM_SEQUENCER", "")
	if _, err := Load(t.Context(), false); !errors.Is(err, ErrEnv) {
		t.Fatal(err)
	}
}

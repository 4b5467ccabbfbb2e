package events_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/compaction"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/gc"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/retention"
	"github.com/loamhq/loam/shared/segmenter"
)

func load(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not JSON", name)
	}
	return b
}

// handlers builds the four functions' real handlers on a real sequencer, an in-memory bucket
// and a Bolt coordination store.
func handlers(t *testing.T) (map[string]notify.Handler, *objstore.Mem) {
	t.Helper()
	mc := server.NewLocalClient(servertest.Start(t))
	bucket := objstore.NewMem()
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	seg, err := segmenter.New(segmenter.Config{Bucket: bucket, Meta: mc, Coord: store})
	if err != nil {
		t.Fatal(err)
	}
	ret, err := retention.New(retention.Config{Meta: mc})
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := compaction.New(compaction.Config{Bucket: bucket, Meta: mc, Coord: store})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gc.New(gc.Config{Bucket: bucket, Meta: mc, Coord: store})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]notify.Handler{"segmenter": seg.Handler(), "retention": ret.Handler(), "compaction": cmp.Handler(), "gc": g.Handler()}, bucket
}

// TestEveryFunctionHasItsEvents: each function has a sweep event, the segmenter its two
// notification events, and nothing else lies here.
func TestEveryFunctionHasItsEvents(t *testing.T) {
	files, _ := filepath.Glob("*.json")
	want := []string{"compaction-sweep.json", "gc-sweep.json", "retention-sweep.json", "sam-env.json", "segmenter-s3.json", "segmenter-sqs.json", "segmenter-sweep.json"}
	if strings.Join(files, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", files, want)
	}
}

// TestSweepEvents: every <function>-sweep.json runs that function's real sweep (classified
// as a scheduled event) and nothing else: the segmenter's notification events are refused
// by the functions that take none.
func TestSweepEvents(t *testing.T) {
	hs, _ := handlers(t)
	for name, h := range hs {
		ev := load(t, name+"-sweep.json")
		if k := notify.Classify(ev); k != notify.KindSchedule {
			t.Errorf("%s-sweep.json: kind %v, want a scheduled event", name, k)
		}
		if _, err := h.Invoke(t.Context(), ev); err != nil {
			t.Errorf("%s sweep: %v", name, err)
		}
		if name == "segmenter" {
			continue
		}
		for _, other := range []string{"segmenter-sqs.json", "segmenter-s3.json"} {
			if _, err := h.Invoke(t.Context(), load(t, other)); !errors.Is(err, notify.ErrBadEvent) {
				t.Errorf("%s took %s: %v, want ErrBadEvent", name, other, err)
			}
		}
	}
}

// TestSegmenterNotificationEvents: the SQS batch and the direct S3 event reach the
// segmenter's WAL handling with the object they name: absent, it is done (a WAL object GC
// already deleted); present but not a WAL object, the notification fails (for SQS as a
// batch item failure naming the message, so only it is retried).
func TestSegmenterNotificationEvents(t *testing.T) {
	hs, bucket := handlers(t)
	seg := hs["segmenter"]
	sqsEv := load(t, "segmenter-sqs.json")
	var batch events.SQSEvent
	if err := json.Unmarshal(sqsEv, &batch); err != nil || len(batch.Records) != 1 {
		t.Fatalf("segmenter-sqs.json: %v", err)
	}
	s3ev, err := notify.S3EventFromBody(batch.Records[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := notify.Objects(s3ev)
	if err != nil || len(objs) != 1 || !objs[0].Created() || !segmenter.IsWALKey(objs[0].Key) {
		t.Fatalf("segmenter-sqs.json names %+v (%v), want one created WAL object", objs, err)
	}
	direct := load(t, "segmenter-s3.json")
	if k := notify.Classify(direct); k != notify.KindS3 {
		t.Fatalf("segmenter-s3.json: kind %v", k)
	}
	d, err := notify.ParseS3Event(direct)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := notify.Objects(d); len(o) != 1 || o[0] != objs[0] {
		t.Errorf("segmenter-s3.json names %+v, segmenter-sqs.json %+v: want the same notification", o, objs)
	}

	resp, err := seg.Invoke(t.Context(), sqsEv)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := resp.(events.SQSEventResponse); !ok || len(r.BatchItemFailures) != 0 {
		t.Fatalf("SQS batch for an absent WAL object: %#v, want no failures", resp)
	}
	if _, err := seg.Invoke(t.Context(), direct); err != nil {
		t.Fatalf("S3 event for an absent WAL object: %v", err)
	}

	// Now the object is there but is no WAL object: the handler reads it and fails. (Each
	// invocation below is a new notification: a handled one is claimed and not redone.)
	if err := bucket.Put(t.Context(), objs[0].Key, []byte(strings.Repeat("not a wal object ", 64))); err != nil {
		t.Fatal(err)
	}
	redelivered := strings.Replace(string(sqsEv), `\"sequencer\":\"0066A1B2C3D4E5F601\"`, `\"sequencer\":\"0066A1B2C3D4E5F602\"`, 1)
	redelivered = strings.Replace(redelivered, `\"size\":8388608`, `\"size\":1088`, 1)
	if redelivered == string(sqsEv) {
		t.Fatal("could not make a second notification from segmenter-sqs.json")
	}
	resp, err = seg.Invoke(t.Context(), json.RawMessage(redelivered))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(events.SQSEventResponse)
	if len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != batch.Records[0].MessageId {
		t.Errorf("SQS batch for a corrupt WAL object: %+v, want a failure for message %s", r, batch.Records[0].MessageId)
	}
}

// TestSAMEnvironment: sam-env.json (sam local invoke --env-vars) gives every function what
// fnenv.Load requires, pointed at `loam dev --aws http://127.0.0.1:5000`'s bucket, table and
// sequencer (local/devcluster's defaults: bucket loam-dev, table loam-dev-coord).
func TestSAMEnvironment(t *testing.T) {
	var env struct{ Parameters map[string]string }
	if err := json.Unmarshal(load(t, "sam-env.json"), &env); err != nil {
		t.Fatal(err)
	}
	p := env.Parameters
	for name, want := range map[string]string{
		"LOAM_BUCKET":      "s3://loam-dev?endpoint=http://127.0.0.1:5000&path_style=true&region=us-east-1",
		"LOAM_SEQUENCER":   "127.0.0.1:7070",
		"LOAM_COORD_TABLE": "loam-dev-coord",
	} {
		if p[name] != want {
			t.Errorf("%s = %q, want %q (loam dev --aws's)", name, p[name], want)
		}
	}
}

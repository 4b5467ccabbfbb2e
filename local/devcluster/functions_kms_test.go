package devcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestFunctionsKeyedNamespace: with a KMS (the embedded local-kms), `loam dev`'s
// functions segment a keyed namespace into sealed segments under ns/<id>/seg/ (no
// plaintext stored), the WAL objects go, and fetch returns the same records before and
// after; retention then trims the partition and gc deletes its sealed segments, leaving
// the namespace's wrapped keys.
func TestFunctionsKeyedNamespace(t *testing.T) {
	ctx := context.Background()
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fns := FunctionsConfig{SegmentTargetBytes: 4 << 10, SegmentMaxAge: 300 * time.Millisecond, GCGrace: 300 * time.Millisecond,
		SweepInterval: 100 * time.Millisecond, WatchInterval: 50 * time.Millisecond}
	var c *Cluster
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err = Start(ctx, Config{DataDir: t.TempDir(), HTTPListener: ln, FlushInterval: 5 * time.Millisecond, Functions: fns, KMSEndpoint: srv.URL,
			SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil && strings.Contains(err.Error(), "address already in use") && try < 3 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	defer c.Close(ctx)
	url := "http://" + c.HTTPAddr()
	cl, _ := streamapi.NewClient(url)
	if _, err := cl.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "k", Partitions: ptr(int32(1))}); err != nil {
		t.Fatal(err)
	}
	if code, body := httpDo(t, "PUT", url+"/v1/namespaces/default/key", `{"create":true}`); code != 200 {
		t.Fatalf("attach a key: %d %s", code, body)
	}
	for i := range 40 {
		recs := []streamapi.Record{{Value: json.RawMessage(fmt.Sprintf(`{"secret":"tenant-%d-%0100d"}`, i, 0))}}
		if _, err := cl.Produce(ctx, "default", "k", recs); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func() []string {
		var out []string
		for off := int64(0); ; {
			resp, err := cl.Fetch(ctx, "default", "k", 0, off, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Records {
				out = append(out, fmt.Sprint(*r.Offset, string(r.Value)))
			}
			if resp.NextOffset >= resp.HighWatermark {
				return out
			}
			off = resp.NextOffset
		}
	}
	before := fetch()
	if len(before) != 40 {
		t.Fatalf("%d records", len(before))
	}
	bucket := c.Bucket()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var wal, sealed, plain int
		bucket.List(ctx, "wal/", func(objstore.ObjectInfo) error { wal++; return nil })
		bucket.List(ctx, "seg/", func(objstore.ObjectInfo) error { plain++; return nil })
		bucket.List(ctx, "ns/", func(o objstore.ObjectInfo) error {
			if strings.Contains(o.Key, "/seg/") {
				sealed++
			}
			return nil
		})
		if plain != 0 {
			t.Fatalf("%d plain segments of a keyed namespace", plain)
		}
		if wal == 0 && sealed >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d WAL objects, %d sealed segments", wal, sealed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		if b, _ := bucket.Get(ctx, o.Key); bytes.Contains(b, []byte("tenant-1")) {
			t.Errorf("%s holds plaintext", o.Key)
		}
		return nil
	})
	if after := fetch(); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("records differ after segmenting: %d, were %d", len(after), len(before))
	}

	// Retention trims the keyed partition and gc deletes its sealed segments; the
	// namespace's wrapped keys stay.
	if code, body := httpDo(t, "PATCH", url+"/v1/namespaces/default/streams/k", `{"retention_ms":1}`); code != 200 {
		t.Fatalf("patch retention: %d %s", code, body)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var sealed, keys int
		bucket.List(ctx, "ns/", func(o objstore.ObjectInfo) error {
			switch {
			case strings.Contains(o.Key, "/seg/"):
				sealed++
			case strings.Contains(o.Key, "/keys/"):
				keys++
			}
			return nil
		})
		if sealed == 0 && keys > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s of retention: %d sealed segments, %d key objects", sealed, keys)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

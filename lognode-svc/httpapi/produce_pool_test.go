package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

// jsonProduceNode is an API over a real sequencer with stream "s" (4 partitions) whose
// writer answers at once, and a JSON produce body of n records of size-byte values.
func jsonProduceNode(t testing.TB, n, size int) (*httpapi.Server, []byte) {
	mc := startSequencer(t)
	if _, err := mc.CreateStream(t.Context(), meta.StreamConfig{Namespace: meta.DefaultNS, Name: "s", Partitions: 4, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}); err != nil {
		t.Fatal(err)
	}
	rd, err := reader.New(reader.Config{Bucket: objstore.NewMem(), Meta: mc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{NodeID: "n", Meta: mc, Reader: rd, Logger: quiet(),
		Writers: map[string]writer.Writer{meta.ClassStandard: instantWriter{}}})
	if err != nil {
		t.Fatal(err)
	}
	val := strings.Repeat("x", size)
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"partition":%d,"value":"%s"}`, i%4, val))
	}
	return api, []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)
}

// produceJSON sends body as a JSON produce with its Content-Length, as a client does.
func produceJSON(t testing.TB, api http.Handler, body []byte) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/namespaces/default/streams/s/records", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	api.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("produce: %d %s", w.Code, w.Body)
	}
}

// TestJSONProduceBodyPooled: JSON produces one after another read their bodies into one
// reused buffer: a request allocates less than a fresh body would add (before, each read
// its body into a new buffer of its length).
func TestJSONProduceBodyPooled(t *testing.T) {
	api, body := jsonProduceNode(t, 64, 16<<10) // a 1 MiB body
	produceJSON(t, api, body)                   // warm: the pool holds one buffer
	const runs = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		produceJSON(t, api, body)
	}
	runtime.ReadMemStats(&after)
	per := float64(after.TotalAlloc-before.TotalAlloc) / runs
	// What a request allocates besides its body's buffer is fixed by the body: the JSON
	// decoder's buffer as it doubles to hold the body (about 3.7 bodies in all here), the
	// decoded values (one body) and the batch built from them (one more): 6.2 bodies. A
	// fresh body buffer adds one body (7.2 before bodies were pooled).
	t.Logf("a JSON produce of a %d KiB body allocates %.0f KiB (%.2f bodies)", len(body)>>10, per/1024, per/float64(len(body)))
	if limit := 6.7 * float64(len(body)); per > limit && !raceEnabled {
		t.Fatalf("a JSON produce of a %d-byte body allocates %.0f bytes, want at most %.0f: the body is read into a fresh buffer", len(body), per, limit)
	}
	if misses, idle := api.BodyPoolStats(); misses != 1 || idle == 0 {
		t.Fatalf("after %d produces one after another the body pool allocated %d buffers and holds %d idle bytes, want 1 and the buffer", runs+1, misses, idle)
	}
}

// BenchmarkJSONProduce: one JSON produce of 64 records of 16 KiB through the handler
// (writer answering at once); B/op includes the body buffer when it is not reused.
func BenchmarkJSONProduce(b *testing.B) {
	api, body := jsonProduceNode(b, 64, 16<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		produceJSON(b, api, body)
	}
}

// keepWriter keeps every request's batches, as written, to check them afterwards.
type keepWriter struct {
	mu   sync.Mutex
	reqs [][]byte
}

func (k *keepWriter) Write(_ context.Context, reqs []writer.Request) ([]writer.Result, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range reqs {
		k.reqs = append(k.reqs, r.Batches)
	}
	return make([]writer.Result, len(reqs)), nil
}
func (*keepWriter) Close(context.Context) error { return nil }

// TestPooledBodiesNotShared: concurrent JSON produces reading into pooled buffers each
// write their own records: once every produce is answered, every batch the writer was
// given still holds the values its request sent (a body buffer reused while its records
// still pointed into it would change them).
func TestPooledBodiesNotShared(t *testing.T) {
	mc := startSequencer(t)
	if _, err := mc.CreateStream(t.Context(), meta.StreamConfig{Namespace: meta.DefaultNS, Name: "s", Partitions: 1, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}); err != nil {
		t.Fatal(err)
	}
	rd, err := reader.New(reader.Config{Bucket: objstore.NewMem(), Meta: mc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	kw := &keepWriter{}
	api, err := httpapi.New(httpapi.Config{NodeID: "n", Meta: mc, Reader: rd, Logger: quiet(),
		Writers: map[string]writer.Writer{meta.ClassStandard: kw}})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each, recs = 8, 10, 20
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var b strings.Builder
				b.WriteString(`{"records":[`)
				for r := range recs {
					if r > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `{"key":"k%d-%d-%d","value":"%s"}`, g, i, r, strings.Repeat(fmt.Sprintf("%d.%d.%d;", g, i, r), 200))
				}
				b.WriteString(`]}`)
				produceJSON(t, api, []byte(b.String()))
			}
		}()
	}
	wg.Wait()
	if len(kw.reqs) != workers*each {
		t.Fatalf("%d requests written, want %d", len(kw.reqs), workers*each)
	}
	for _, raw := range kw.reqs {
		bt, _, err := recordbatch.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := bt.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			var g, i, n int
			if _, err := fmt.Sscanf(string(r.Key), "k%d-%d-%d", &g, &i, &n); err != nil {
				t.Fatalf("key %q: %v", r.Key, err)
			}
			// A JSON value is stored as its JSON text: the string with its quotes.
			if want := `"` + strings.Repeat(fmt.Sprintf("%d.%d.%d;", g, i, n), 200) + `"`; string(r.Value) != want {
				t.Fatalf("record %s holds %.40q…, want %.40q…", r.Key, r.Value, want)
			}
		}
	}
}

package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// instantWriter answers every request at once, as committed at offset 0.
type instantWriter struct{}

func (instantWriter) Write(_ context.Context, reqs []writer.Request) ([]writer.Result, error) {
	return make([]writer.Result, len(reqs)), nil
}
func (instantWriter) Close(context.Context) error { return nil }

// TestIdempotentProduceParsesOnce: an idempotent JSON produce costs what a plain one of
// the same records does, give or take its producer fields: the body's JSON is decoded once,
// not a second time for the producer fields.
func TestIdempotentProduceParsesOnce(t *testing.T) {
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
	const n = 400
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"partition":%d,"value":{"i":%d}}`, i%4, i))
	}
	plain := `{"records":[` + strings.Join(recs, ",") + `]}`
	idem := `{"producer_id":7,"epoch":0,"sequences":{"0":0,"1":0,"2":0,"3":0},"records":[` + strings.Join(recs, ",") + `]}`
	allocs := func(body string) float64 {
		return testing.AllocsPerRun(20, func() {
			w := httptest.NewRecorder()
			api.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/namespaces/default/streams/s/records", bytes.NewReader([]byte(body))))
			if w.Code != http.StatusOK {
				t.Fatalf("produce: %d %s", w.Code, w.Body)
			}
		})
	}
	a, b := allocs(plain), allocs(idem)
	t.Logf("allocations per request: plain %.0f, idempotent %.0f", a, b)
	if b > a+n/4 {
		t.Fatalf("an idempotent produce of %d records allocates %.0f times, a plain one %.0f: the body is decoded more than once", n, b, a)
	}
}

package streamapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkProduceBinaryClient is the Go client's own cost of one binary produce (500
// records of 1 KiB to one partition: building the batch, sending it, reading the answer)
// against a node stand-in that reads the body and answers at once; MB/s counts value bytes.
func BenchmarkProduceBinaryClient(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"offsets":[{"partition":0,"offset":0}],"token":"1-1"}`))
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	p := int32(0)
	val := bytes.Repeat([]byte("x"), 1024)
	recs := make([]Record, 500)
	for i := range recs {
		recs[i] = BytesValue(val)
		recs[i].Partition = &p
	}
	b.SetBytes(int64(len(recs) * len(val)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Produce(context.Background(), "default", "s", recs); err != nil {
			b.Fatal(err)
		}
	}
}

package httpapi_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/walfmt"
)

// TestBinaryProduceChunkChecksum: a binary produce's WAL chunk takes its checksum from the
// batches' checked CRCs (not read from the bytes again): the object in the bucket decodes
// with every checksum right, its chunk byte for byte the three batches sent (uncompressed,
// snappy, gzip), and the records read back.
func TestBinaryProduceChunkChecksum(t *testing.T) {
	bucket := objstore.NewMem()
	base := startNodeOn(t, httpapi.Limits{}, nil, bucket).srv.URL
	cl, err := streamapi.NewClient(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateStream(t.Context(), "default", streamapi.CreateStreamRequest{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	var body []byte
	for i, c := range []recordbatch.Compression{recordbatch.None, recordbatch.Snappy, recordbatch.Gzip} {
		recs := []streamapi.Record{streamapi.AutoValue([]byte(strings.Repeat("v", 100+i))), streamapi.AutoValue([]byte(`{"i":1}`))}
		if body, err = streamapi.AppendBatch(body, recs, c, 1700000000000); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(base+"/v1/namespaces/default/streams/s/records?partition=0", streamapi.MediaRecordBatch, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("binary produce: %d", resp.StatusCode)
	}
	var found int
	err = bucket.List(t.Context(), "", func(o objstore.ObjectInfo) error {
		if !strings.HasSuffix(o.Key, ".wal") {
			return nil
		}
		obj, err := bucket.Get(t.Context(), o.Key)
		if err != nil {
			return err
		}
		wo, err := walfmt.Decode(obj)
		if err != nil {
			t.Fatalf("WAL object %s: %v", o.Key, err)
		}
		for _, ref := range wo.Chunks {
			_, payload, err := walfmt.DecodeChunk(obj[ref.Offset : ref.Offset+ref.Length])
			if err != nil {
				t.Fatalf("chunk of %s: %v", o.Key, err)
			}
			if !bytes.Equal(payload, body) {
				t.Fatalf("chunk payload of %d bytes differs from the %d bytes sent", len(payload), len(body))
			}
			found++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != 1 {
		t.Fatalf("%d chunks found in the bucket, want 1", found)
	}
	got, err := cl.Fetch(t.Context(), "default", "s", 0, 0, 0, 0)
	if err != nil || len(got.Records) != 6 {
		t.Fatalf("fetch: %d records, %v; want 6", len(got.Records), err)
	}
}

package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

func postBatches(t *testing.T, url string, body []byte) httpReply {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", streamapi.MediaRecordBatch)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{resp.StatusCode, resp.Header, b}
}

func batchOf(t *testing.T, c recordbatch.Compression, recs ...recordbatch.Record) []byte {
	t.Helper()
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = c
	b, err := recordbatch.Append(nil, recs, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBinaryProduceLimits: the node's limits hold on the binary path (records per request,
// bytes per record, decompressed bytes per batch, body size), each refusal names the batch,
// and nothing refused is written.
func TestBinaryProduceLimits(t *testing.T) {
	n := startNode(t, httpapi.Limits{MaxRecords: 3, MaxRecordBytes: 100, MaxRequestBytes: 4096})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"l"}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	two := batchOf(t, recordbatch.None, recordbatch.Record{Timestamp: 1, Value: []byte("a")}, recordbatch.Record{Timestamp: 1, Value: []byte("b")})
	for _, tc := range []struct {
		what      string
		body      []byte
		status    int
		code, msg string
	}{
		{"records over the limit", append(append([]byte{}, two...), two...), 413, streamapi.CodeRequestTooLarge, "batch 1"},
		{"record over the limit", batchOf(t, recordbatch.None, recordbatch.Record{Timestamp: 1, Key: []byte("k"), Value: make([]byte, 100)}), 413, streamapi.CodeRecordTooLarge, "record 0"},
		{"decompresses past the body limit", batchOf(t, recordbatch.Gzip, recordbatch.Record{Timestamp: 1, Value: make([]byte, 8000)}), 413, streamapi.CodeRequestTooLarge, "batch 0"},
		{"body over the limit", make([]byte, 5000), 413, streamapi.CodeRequestTooLarge, "4096"},
	} {
		r := postBatches(t, base+"/l/records?partition=0", tc.body)
		if d := r.detail(t); r.status != tc.status || d.Code != tc.code || !strings.Contains(d.Message, tc.msg) {
			t.Errorf("%s: %d %s, want %d %s naming %q", tc.what, r.status, r.body, tc.status, tc.code, tc.msg)
		}
	}
	if hw := highWatermark(t, base+"/l"); hw != 0 {
		t.Fatalf("high watermark %d after refused produces", hw)
	}
	if r := postBatches(t, base+"/l/records?partition=0", two); r.status != http.StatusOK {
		t.Fatalf("a batch within the limits: %d %s", r.status, r.body)
	}
	// A body of another type names both the types produce takes.
	r := call(t, "POST", base+"/l/records", "")
	req, _ := http.NewRequest("POST", base+"/l/records", strings.NewReader("x"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || !bytes.Contains(b, []byte(streamapi.MediaRecordBatch)) {
		t.Fatalf("text/plain produce: %d %s (and empty: %d)", resp.StatusCode, b, r.status)
	}
}

// TestBinaryClientAgainstNode: the Go client on its default binary path and on the JSON
// path place records alike (explicit partition, Kafka's partitioner for keys, one
// round-robin partition for a request's keyless records) and read the same records back
// from the real node, whichever path wrote them.
func TestBinaryClientAgainstNode(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	ctx := t.Context()
	bin, err := streamapi.NewClient(n.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := streamapi.NewClient(n.srv.URL, streamapi.WithJSON())
	if err != nil {
		t.Fatal(err)
	}
	parts := int32(4)
	for _, name := range []string{"bin", "json"} {
		if _, err := bin.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: name, Partitions: &parts}); err != nil {
			t.Fatal(err)
		}
	}
	var recs []streamapi.Record
	for i := range 12 {
		r := streamapi.AutoValue(fmt.Appendf(nil, `{"i":%d}`, i))
		switch i % 3 {
		case 0:
			r.SetKey(fmt.Appendf(nil, "key-%d", i))
		case 1:
			p := int32(i % 4)
			r.Partition = &p
		}
		r.Headers = streamapi.Headers{streamapi.StringHeader("i", fmt.Sprint(i)), {Key: "i", Value: []byte{0xff}}, {Key: "null"}}
		ts := int64(1700000000000 + i)
		r.Timestamp = &ts
		recs = append(recs, r)
	}
	resB, err := bin.Produce(ctx, "default", "bin", recs)
	if err != nil {
		t.Fatal(err)
	}
	resJ, err := js.Produce(ctx, "default", "json", recs)
	if err != nil {
		t.Fatal(err)
	}
	keyless := int32(-1)
	for i, r := range recs {
		ob, oj := resB.Offsets[i], resJ.Offsets[i]
		switch {
		case r.Partition != nil:
			if ob.Partition != *r.Partition || oj.Partition != *r.Partition {
				t.Fatalf("record %d: partitions %d/%d, want %d", i, ob.Partition, oj.Partition, *r.Partition)
			}
		case r.Key != nil:
			if want := httpapi.KeyPartition([]byte(*r.Key), parts); ob.Partition != want || oj.Partition != want {
				t.Fatalf("record %d key %s: partitions %d/%d, want %d", i, *r.Key, ob.Partition, oj.Partition, want)
			}
		default:
			if keyless == -1 {
				keyless = ob.Partition
			}
			if ob.Partition != keyless {
				t.Fatalf("keyless records of one request spread over partitions %d and %d", keyless, ob.Partition)
			}
		}
	}
	if !strings.HasPrefix(resB.Token, "v1.") {
		t.Fatalf("token %q", resB.Token)
	}
	// Each partition reads the same through either client; both streams hold the same
	// records (keyless ones may sit in another partition: the round-robin moved on).
	all := map[string][]string{}
	for _, name := range []string{"bin", "json"} {
		for p := range parts {
			b, err := bin.Fetch(ctx, "default", name, p, 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			j, err := js.Fetch(ctx, "default", name, p, 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if gb, gj := normalize(t, b.Records), normalize(t, j.Records); !slices.Equal(gb, gj) {
				t.Fatalf("partition %d of %s reads differently in binary and JSON:\n%s\n%s", p, name, gb, gj)
			} else {
				all[name] = append(all[name], gb...)
			}
		}
		slices.Sort(all[name])
	}
	if !slices.Equal(all["bin"], all["json"]) || len(all["bin"]) != len(recs) {
		t.Fatalf("the streams hold different records:\n%s\n%s", all["bin"], all["json"])
	}
}

// normalize renders records without offset and partition (the streams assign their own).
func normalize(t *testing.T, recs []streamapi.Record) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		r.Offset, r.Partition = nil, nil
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

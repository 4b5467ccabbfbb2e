package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// idemBatch is one batch of n records of producer id/epoch from sequence seq on.
func idemBatch(t *testing.T, id int64, epoch int16, seq int32, n int, tag string) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{Timestamp: 1, Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	opt := recordbatch.DefaultBuildOptions()
	opt.ProducerID, opt.ProducerEpoch, opt.BaseSequence = id, epoch, seq
	b, err := recordbatch.Append(nil, recs, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func offsetsOf(t *testing.T, r httpReply) []int64 {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	var res streamapi.ProduceResponse
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(res.Offsets))
	for i, o := range res.Offsets {
		out[i] = o.Offset
	}
	return out
}

// TestBinaryIdempotentProduce: batches carrying a producer in their headers commit once on
// the real sequencer: a retried body answers its first offsets and writes nothing; a gap in
// the sequences is 409 out_of_order_sequence, an old epoch 409 producer_fenced, and neither
// writes anything.
func TestBinaryIdempotentProduce(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"idem","partitions":2}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	_, pr := post(t, n.srv.URL+"/v1/namespaces/default/producers", `{"name":"bin"}`)
	id := int64(pr["producer_id"].(float64))
	url := base + "/idem/records?partition=1"

	// Two batches, sequences 0..2 and 3..4: one request of the producer.
	body := append(idemBatch(t, id, 0, 0, 3, "a"), idemBatch(t, id, 0, 3, 2, "b")...)
	first := offsetsOf(t, postBatches(t, url, body))
	if len(first) != 2 || first[0] != 0 || first[1] != 3 {
		t.Fatalf("first offsets %v, want [0 3]", first)
	}
	again := offsetsOf(t, postBatches(t, url, body))
	if fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("retry answered %v, want the first attempt's %v", again, first)
	}
	next := offsetsOf(t, postBatches(t, url, idemBatch(t, id, 0, 5, 1, "c")))
	if next[0] != 5 {
		t.Fatalf("next batch at %v, want 5 (the retry wrote nothing)", next)
	}

	for _, tc := range []struct {
		what      string
		body      []byte
		status    int
		code, msg string
	}{
		{"a gap in the sequence", idemBatch(t, id, 0, 9, 1, "gap"), 409, streamapi.CodeOutOfOrderSequence, ""},
		{"sequences not consecutive within the body", append(idemBatch(t, id, 0, 6, 1, "x"), idemBatch(t, id, 0, 8, 1, "y")...), 400, streamapi.CodeInvalidRecord, "batch 1"},
		{"two producers in one body", append(idemBatch(t, id, 0, 6, 1, "x"), idemBatch(t, id+1, 0, 7, 1, "y")...), 400, streamapi.CodeInvalidRecord, "batch 1"},
		{"a producer batch after a plain one", append(idemBatch(t, -1, -1, -1, 1, "x"), idemBatch(t, id, 0, 6, 1, "y")...), 400, streamapi.CodeInvalidRecord, "batch 1"},
		{"an epoch of -1", idemBatch(t, id, -1, 6, 1, "x"), 400, streamapi.CodeInvalidRecord, "producerEpoch -1"},
		{"a sequence without a producer", idemBatch(t, -1, -1, 6, 1, "x"), 400, streamapi.CodeInvalidRecord, "baseSequence 6"},
	} {
		r := postBatches(t, url, tc.body)
		if d := r.detail(t); r.status != tc.status || d.Code != tc.code || !strings.Contains(d.Message, tc.msg) {
			t.Errorf("%s: %d %s, want %d %s naming %q", tc.what, r.status, r.body, tc.status, tc.code, tc.msg)
		}
	}
	// Without a partition the body could land elsewhere on a retry: refused.
	if r := postBatches(t, base+"/idem/records", idemBatch(t, id, 0, 6, 1, "x")); r.status != 400 || r.detail(t).Code != streamapi.CodeInvalidArgument {
		t.Errorf("no partition: %d %s", r.status, r.body)
	}
	// The name initialized again: epoch 1 fences epoch 0.
	if st, out := post(t, n.srv.URL+"/v1/namespaces/default/producers", `{"name":"bin"}`); st != 200 || out["epoch"] != 1.0 {
		t.Fatalf("init again: %d %v", st, out)
	}
	if r := postBatches(t, url, idemBatch(t, id, 0, 6, 1, "old")); r.status != 409 || r.detail(t).Code != streamapi.CodeProducerFenced {
		t.Errorf("fenced: %d %s", r.status, r.body)
	}
	if hw := partitionHW(t, base+"/idem", 1); hw != 6 {
		t.Fatalf("partition 1 high watermark %d, want 6: a refused or repeated body wrote", hw)
	}
	if got := offsetsOf(t, postBatches(t, url, idemBatch(t, id, 1, 0, 2, "new"))); got[0] != 6 {
		t.Fatalf("new epoch from sequence 0 at %v, want 6", got)
	}
}

func partitionHW(t *testing.T, streamURL string, p int32) int64 {
	t.Helper()
	r := call(t, "GET", streamURL, "")
	var st streamapi.Stream
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	for _, pi := range st.PartitionInfo {
		if pi.Partition == p {
			return pi.HighWatermark
		}
	}
	t.Fatalf("no partition %d in %s", p, r.body)
	return 0
}

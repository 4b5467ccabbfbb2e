package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/arrowenc/arrowtest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
)

// nodeOn starts a log node on bucket and sequencer mc.
func nodeOn(t testing.TB, id string, bucket objstore.Bucket, mc meta.Client) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: id, Listener: ln, Bucket: bucket, Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet(), Zone: "z1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return srv
}

// ipcColumn decodes an Arrow IPC fetch answer of one float64 column.
func ipcColumn(t *testing.T, body []byte) []float64 {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var out []float64
	for rd.Next() {
		b := rd.RecordBatch()
		if b.NumCols() != 1 || b.Schema().Field(0).Name != "score" {
			t.Fatalf("IPC answer of schema %v", b.Schema())
		}
		out = append(out, b.Column(0).(*array.Float64).Float64Values()...)
	}
	return out
}

// TestArrowFetchFromSegments: a cold node fetches an arrow partition that the segmenter
// moved into arrow segments: JSON records (all columns, projected) identical to the
// fetch from the WAL before, and Arrow IPC of one column reading about a tenth of the
// bytes the full fetch reads.
func TestArrowFetchFromSegments(t *testing.T) {
	ctx := context.Background()
	mc := startSequencer(t)
	mem := objstore.NewMem()
	a := nodeOn(t, "a", mem, mc)
	base := a.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"wide","partitions":1,"encoding":"arrow","schema":`+arrowtest.Schema10+`}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	const n = 3000
	for req := 0; req < n/500; req++ {
		var sb strings.Builder
		sb.WriteString(`{"records":[`)
		for i := range 500 {
			if i > 0 {
				sb.WriteByte(',')
			}
			in, _ := arrowtest.Record(int64(req*500+i), false)
			sb.WriteString(`{"value":` + in + `}`)
		}
		sb.WriteString(`]}`)
		if r := call(t, "POST", base+"/wide/records", sb.String()); r.status != 200 {
			t.Fatalf("produce: %d %s", r.status, r.body)
		}
	}
	part := "/v1/namespaces/default/streams/wide/partitions/0/records?offset=0&max_bytes=8388608"
	walJSON := arrowFetch(t, a.URL+part, "")
	walScore := arrowFetch(t, a.URL+part+"&columns=score", "")
	walIPC := arrowFetch(t, a.URL+part+"&columns=score", httpapi.MediaArrowStream)
	if walJSON.status != 200 || walScore.status != 200 || walIPC.status != 200 {
		t.Fatalf("fetch from the WAL: %d %d %d %s", walJSON.status, walScore.status, walIPC.status, walJSON.body)
	}
	var got struct {
		Records []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(walJSON.body, &got); err != nil || len(got.Records) != n {
		t.Fatalf("%d records from the WAL: %v", len(got.Records), err)
	}

	st, _, err := mc.GetStream(ctx, "default", "wide")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := segmenter.New(segmenter.Config{Bucket: mem, Meta: mc, TargetBytes: 64 << 10, MaxAge: time.Nanosecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sg.Partition(ctx, st.ID, 0); err != nil || res.Segments < 2 {
		t.Fatalf("segment: %+v %v", res, err)
	}

	counting := objstore.Counting(mem)
	b := nodeOn(t, "b", counting, mc) // cold: nothing cached
	read := func(url, accept string) (httpReply, objstore.Stats) {
		before := counting.Stats()
		r := arrowFetch(t, url, accept)
		after := counting.Stats()
		if r.status != 200 {
			t.Fatalf("fetch %s: %d %s", url, r.status, r.body)
		}
		return r, objstore.Stats{GetBytes: after.GetBytes - before.GetBytes, GetRanges: after.GetRanges - before.GetRanges, Gets: after.Gets - before.Gets}
	}
	segJSON, full := read(b.URL+part, "")
	if !bytes.Equal(segJSON.body, walJSON.body) {
		t.Fatalf("JSON fetch from segments differs from the WAL's:\n%.300s\n%.300s", segJSON.body, walJSON.body)
	}
	segScore, _ := read(b.URL+part+"&columns=score", "")
	if !bytes.Equal(segScore.body, walScore.body) {
		t.Fatalf("projected JSON fetch from segments differs:\n%.300s\n%.300s", segScore.body, walScore.body)
	}
	segIPC, one := read(b.URL+part+"&columns=score", httpapi.MediaArrowStream)
	if w, g := ipcColumn(t, walIPC.body), ipcColumn(t, segIPC.body); fmt.Sprint(w) != fmt.Sprint(g) || len(g) != n {
		t.Fatalf("IPC fetch of score: %d values from segments, %d from the WAL", len(g), len(w))
	}
	// The footers were read by the first fetch; what the later ones read is columns.
	_, again := read(b.URL+part, "")
	ratio := float64(one.GetBytes) / float64(again.GetBytes)
	t.Logf("cold full fetch %d bytes (%d GETs, footers included); warm full %d bytes in %d GETs; 1 of 10 columns %d bytes in %d GETs (%.3f)",
		full.GetBytes, full.GetRanges+full.Gets, again.GetBytes, again.GetRanges, one.GetBytes, one.GetRanges, ratio)
	if ratio > 0.15 || one.GetRanges > again.GetRanges {
		t.Fatalf("1 of 10 columns read %.3f of the bytes in %d GETs (all columns: %d GETs)", ratio, one.GetRanges, again.GetRanges)
	}
}

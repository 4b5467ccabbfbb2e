package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/arrowenc/arrowtest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
)

// segNode starts a log node with HTTP and gRPC on bucket and sequencer mc, and a Flight
// client of it.
func segNode(t testing.TB, id string, bucket objstore.Bucket, mc meta.Client) (*node.Node, flight.Client) {
	t.Helper()
	n, err := node.Start(context.Background(), node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: bucket, Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: quiet(), Zone: "z1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return n, flight.NewClientFromConn(conn, nil)
}

// segmentedWide produces n rows of arrowtest's ten-column schema to a one-partition arrow
// stream "wide" through a node on mem, reads them back over Flight DoGet from the WAL (all
// columns and "score"), segments the partition and answers those rows.
func segmentedWide(t testing.TB, mem objstore.Bucket, mc meta.Client, n int) (walAll, walOne []string) {
	t.Helper()
	cx := ctx(t)
	if err := mc.CreateNamespace(cx, meta.DefaultNS); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	a, fa := segNode(t, "a", mem, mc)
	base := "http://" + a.Addr() + "/v1/namespaces/default/streams"
	if code, body := httpDo(t, "POST", base, `{"name":"wide","partitions":1,"encoding":"arrow","schema":`+arrowtest.Schema10+`}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
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
		if code, body := httpDo(t, "POST", base+"/wide/records", sb.String()); code != 200 {
			t.Fatalf("produce: %d %s", code, body)
		}
	}
	walAll, walOne = doGet2(t, fa, n)
	if len(walAll) != n || len(walOne) != n {
		t.Fatalf("DoGet from the WAL: %d and %d rows, want %d", len(walAll), len(walOne), n)
	}

	st, _, err := mc.GetStream(cx, "default", "wide")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := segmenter.New(segmenter.Config{Bucket: mem, Meta: mc, TargetBytes: 64 << 10, MaxAge: time.Nanosecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sg.Partition(cx, st.ID, 0); err != nil || res.Segments < 2 {
		t.Fatalf("segment: %+v %v", res, err)
	}
	return walAll, walOne
}

// doGet2 reads stream "wide" over DoGet with c: all columns, then "score" only.
func doGet2(t testing.TB, c flight.Client, n int) (all, one []string) {
	_, all = doGet(t, c, ctx(t), flightTicket(n, ""))
	_, one = doGet(t, c, ctx(t), flightTicket(n, `,"columns":["score"]`))
	return all, one
}

// flightTicket is a DoGet ticket of stream "wide", partition 0, offsets [0, n), with the
// ticket's "columns" member (or "").
func flightTicket(n int, cols string) []byte {
	return []byte(fmt.Sprintf(`{"namespace":"default","stream":"wide","partition":0,"offset":0,"end_offset":%d%s}`, n, cols))
}

// TestFlightDoGetFromSegments: a cold node's Flight DoGet of an arrow partition the
// segmenter moved into arrow segments answers the rows the WAL answered, all columns and
// one of ten; the projected DoGet reads about a tenth of the bucket bytes of the full one,
// with no more GETs.
func TestFlightDoGetFromSegments(t *testing.T) {
	cx := ctx(t)
	mc := startSequencer(t)
	mem := objstore.NewMem()
	const n = 3000
	walAll, walOne := segmentedWide(t, mem, mc, n)
	ticket := func(cols string) []byte { return flightTicket(n, cols) }
	counting := objstore.Counting(mem)
	_, fb := segNode(t, "b", counting, mc) // cold: nothing cached
	read := func(tk []byte) ([]string, objstore.Stats) {
		before := counting.Stats()
		_, rows := doGet(t, fb, cx, tk)
		after := counting.Stats()
		return rows, objstore.Stats{GetBytes: after.GetBytes - before.GetBytes, GetRanges: after.GetRanges - before.GetRanges, Gets: after.Gets - before.Gets}
	}
	segAll, full := read(ticket(""))
	segOne, one := read(ticket(`,"columns":["score"]`))
	if strings.Join(segAll, "\n") != strings.Join(walAll, "\n") {
		t.Fatalf("DoGet from segments differs from the WAL's: %d rows, first %.200s vs %.200s", len(segAll), first(segAll), first(walAll))
	}
	if strings.Join(segOne, "\n") != strings.Join(walOne, "\n") {
		t.Fatalf("projected DoGet from segments differs: %d rows, first %.200s vs %.200s", len(segOne), first(segOne), first(walOne))
	}
	ratio := float64(one.GetBytes) / float64(full.GetBytes)
	t.Logf("DoGet from segments: all columns %d bytes in %d GETs; 1 of 10: %d bytes (%.3f) in %d GETs",
		full.GetBytes, full.Gets+full.GetRanges, one.GetBytes, ratio, one.Gets+one.GetRanges)
	if ratio > 0.15 {
		t.Errorf("the projected DoGet read %.3f of the full DoGet's bytes, want about a tenth", ratio)
	}
	if one.Gets+one.GetRanges > full.Gets+full.GetRanges {
		t.Errorf("the projected DoGet made %d GETs, the full one %d", one.Gets+one.GetRanges, full.Gets+full.GetRanges)
	}
}

func first(rows []string) string {
	if len(rows) == 0 {
		return ""
	}
	return rows[0]
}

// BenchmarkFlightDoGetSegments: DoGet of 3,000 ten-column rows from arrow segments by a
// node whose caches hold nothing of them (segment reads are not cached), all columns and 1
// of 10: MB/s of the answer's Arrow bytes, and the bucket bytes and GETs per DoGet.
func BenchmarkFlightDoGetSegments(b *testing.B) {
	mc := startSequencer(b)
	mem := objstore.NewMem()
	const n = 3000
	segmentedWide(b, mem, mc, n)
	counting := objstore.Counting(mem)
	_, fb := segNode(b, "b", counting, mc)
	for _, cs := range []struct{ name, cols string }{{"all-columns", ""}, {"1-of-10", `,"columns":["score"]`}} {
		b.Run(cs.name, func(b *testing.B) {
			cx := ctx(b)
			before := counting.Stats()
			var served int64
			b.ResetTimer()
			for range b.N {
				st, err := fb.DoGet(cx, &flight.Ticket{Ticket: flightTicket(n, cs.cols)})
				if err != nil {
					b.Fatal(err)
				}
				for {
					fd, err := st.Recv()
					if err != nil {
						break
					}
					served += int64(len(fd.GetDataHeader()) + len(fd.GetDataBody()))
				}
			}
			b.StopTimer()
			after := counting.Stats()
			b.SetBytes(served / int64(b.N))
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(after.GetBytes-before.GetBytes)/float64(b.N), "bucket-B/op")
			b.ReportMetric(float64(after.Gets+after.GetRanges-before.Gets-before.GetRanges)/float64(b.N), "GETs/op")
		})
	}
}

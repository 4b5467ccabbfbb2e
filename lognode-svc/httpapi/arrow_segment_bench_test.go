package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
)

// BenchmarkFetchArrowSegments: the rows of BenchmarkFetchArrow (20,000 rows of ten
// columns) fetched over HTTP from the WAL (node a, which wrote them) and, after the
// segmenter moved them into arrow segments, from the segments by a second node (no
// chunk cache applies to arrow reads; the footers are read once and cached). It reports
// rows/s, response bytes, and the bytes and GETs each fetch took from the bucket.
//
//	go test -run XXX -bench FetchArrowSegments -benchtime 20x ./lognode-svc/httpapi/
func BenchmarkFetchArrowSegments(b *testing.B) {
	_, arrowBody, schema := benchBodies()
	mc := startSequencer(b)
	mem := objstore.NewMem()
	walCount := objstore.Counting(mem)
	a := nodeOn(b, "a", walCount, mc)
	base := a.URL + "/v1/namespaces/default/streams"
	benchCreate(b, base, `{"name":"s","partitions":1,"encoding":"arrow","schema":`+schema+`}`)
	const reqs = 40
	for range reqs {
		benchPost(b, base+"/s/records", arrowBody)
	}
	fetch := func(b *testing.B, url, accept string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("fetch: %v %v", resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Loam-Next-Offset") != strconv.Itoa(reqs*benchPerReq) {
			b.Fatalf("next offset %s", resp.Header.Get("Loam-Next-Offset"))
		}
		return len(body)
	}
	cases := []struct{ name, query, accept string }{
		{"json-all", "", ""}, {"json-1of10", "&columns=qty", ""},
		{"ipc-all", "", httpapi.MediaArrowStream}, {"ipc-1of10", "&columns=qty", httpapi.MediaArrowStream},
	}
	part := "/v1/namespaces/default/streams/s/partitions/0/records?offset=0&max_bytes=67108864"
	run := func(b *testing.B, where, url string, cb *objstore.CountingBucket) {
		for _, c := range cases {
			b.Run(where+"-"+c.name, func(b *testing.B) {
				var size int
				before := cb.Stats()
				for range b.N {
					size = fetch(b, url+part+c.query, c.accept)
				}
				after := cb.Stats()
				b.ReportMetric(float64(b.N*reqs*benchPerReq)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(size), "response-B")
				b.ReportMetric(float64(after.GetBytes-before.GetBytes)/float64(b.N), "bucket-B/op")
				b.ReportMetric(float64(after.GetRanges+after.Gets-before.GetRanges-before.Gets)/float64(b.N), "GETs/op")
			})
		}
	}
	run(b, "wal", a.URL, walCount)

	st, _, err := mc.GetStream(context.Background(), "default", "s")
	if err != nil {
		b.Fatal(err)
	}
	sg, err := segmenter.New(segmenter.Config{Bucket: mem, Meta: mc, TargetBytes: 4 << 20, MaxAge: time.Nanosecond, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sg.Partition(context.Background(), st.ID, 0); err != nil {
		b.Fatal(err)
	}
	segCount := objstore.Counting(mem)
	cold := nodeOn(b, "b", segCount, mc)
	fetch(b, cold.URL+part, "") // reads and caches the footers
	run(b, "seg", cold.URL, segCount)
}

func benchCreate(b *testing.B, base, body string) {
	resp, err := http.Post(base, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 201 {
		b.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
}

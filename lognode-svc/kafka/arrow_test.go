package kafka_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func httpJSON(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestKgoConsumeArrowStream: a Kafka client consumes an arrow stream: RecordBatch v2
// built from the rows, key the key column, timestamp the timestamp column, value the row
// as the HTTP JSON fetch's value, headers the headers column's; a consumer waiting at the
// end gets rows produced later (the long-poll); produce over Kafka is refused with
// INVALID_RECORD.
func TestKgoConsumeArrowStream(t *testing.T) {
	e := start(t)
	base := e.http + "/v1/namespaces/default/streams"
	if code, body := httpJSON(t, "POST", base, `{"name":"rows","partitions":2,"encoding":"arrow","schema":{"fields":[
	 {"name":"id","type":"utf8","nullable":false},{"name":"n","type":"int32","nullable":true},
	 {"name":"ts","type":"timestamp","unit":"us","nullable":false},
	 {"name":"_headers","type":"list","nullable":true,"item":{"type":"struct","nullable":false,"fields":[{"name":"key","type":"utf8","nullable":false},{"name":"value","type":"binary","nullable":true}]}}],
	 "key":"id","timestamp":"ts","headers":"column"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var recs []string
	for i := 0; i < 30; i++ {
		recs = append(recs, fmt.Sprintf(`{"value":{"id":"k%d","n":%d,"ts":%d},"headers":[{"key":"h","value":"v%d"}]}`, i, i, 1700000000000000+i*1000, i))
	}
	if code, body := httpJSON(t, "POST", base+"/rows/records", `{"records":[`+strings.Join(recs, ",")+`]}`); code != 200 {
		t.Fatalf("produce: %d %s", code, body)
	}
	// The HTTP JSON fetch's values, by partition and offset.
	want := map[string]string{}
	for p := 0; p < 2; p++ {
		_, b := httpJSON(t, "GET", fmt.Sprintf("%s/rows/partitions/%d/records", base, p), "")
		var f struct {
			Records []struct {
				Offset int64           `json:"offset"`
				Value  json.RawMessage `json:"value"`
			} `json:"records"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records {
			want[fmt.Sprintf("%d/%d", p, r.Offset)] = string(r.Value)
		}
	}
	c := e.client(t, kgo.ConsumeTopics("rows"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	for got < 30 {
		fs := c.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			var row struct {
				ID string `json:"id"`
				N  int    `json:"n"`
			}
			if err := json.Unmarshal(r.Value, &row); err != nil {
				t.Fatalf("value %s: %v", r.Value, err)
			}
			w := want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]
			switch {
			case string(r.Value) != w:
				t.Fatalf("partition %d offset %d: value %s, HTTP %s", r.Partition, r.Offset, r.Value, w)
			case string(r.Key) != row.ID:
				t.Fatalf("key %q for row %s", r.Key, r.Value)
			case r.Timestamp.UnixMilli() != 1700000000000+int64(row.N):
				t.Fatalf("timestamp %v for row %s", r.Timestamp, r.Value)
			case len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != fmt.Sprint("v", row.N):
				t.Fatalf("headers %v for row %s", r.Headers, r.Value)
			}
		})
	}
	// ListOffsets by time finds the first row whose timestamp column reaches it.
	lo, err := e.admin(t).ListOffsetsAfterMilli(ctx(t), 1700000000015, "rows")
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) {
		n := func(off int64) int {
			var row struct {
				N int `json:"n"`
			}
			_ = json.Unmarshal([]byte(want[fmt.Sprintf("%d/%d", o.Partition, off)]), &row)
			return row.N
		}
		if o.Err != nil || n(o.Offset) < 15 || o.Offset > 0 && n(o.Offset-1) >= 15 || o.Timestamp != 1700000000000+int64(n(o.Offset)) {
			t.Errorf("partition %d: offset %d timestamp %d for time 1700000000015 (%v)", o.Partition, o.Offset, o.Timestamp, o.Err)
		}
	})
	// Rows produced while the consumer waits at the end reach it.
	go func() {
		time.Sleep(300 * time.Millisecond)
		httpJSON(t, "POST", base+"/rows/records", `{"records":[{"value":{"id":"late","ts":1700000000000000}}]}`)
	}()
	c2 := e.client(t, kgo.ConsumeTopics("rows"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(5*time.Second))
	for done := false; !done; {
		fs := c2.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == "late" {
				done = true
			}
		})
	}

	p := e.client(t, kgo.DefaultProduceTopic("rows"), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	err = p.ProduceSync(ctx(t), &kgo.Record{Value: []byte(`{"id":"x","ts":1}`)}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce to an arrow stream: %v, want INVALID_RECORD", err)
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The arrow stream of the kill test: id is the key column (placement by murmur2 of its
// decimal text), ts the timestamp column.
const arrowE2ESchema = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"pad","type":"utf8","nullable":true},
 {"name":"n","type":"float64","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false}],"key":"id","timestamp":"ts"}`

// arrowTS0 is the timestamp of row 0: now, so the stream's 7-day retention (by the
// segments' max timestamp, as Kafka's) keeps every row for the whole test.
var arrowTS0 = time.Now().UnixMilli()

// arrowRow is row id as the JSON fetch renders its value (the form produce takes too).
func arrowRow(id int, rng *rand.Rand) string {
	return fmt.Sprintf(`{"id":%d,"pad":"%x","n":%d.5,"ts":%d}`, id, rng.Uint64(), id%1000, arrowTS0+int64(id))
}

// arrowIPC is rows as an Arrow IPC stream (arrow-go's writer).
func arrowIPC(rows []string) ([]byte, error) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "pad", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for _, r := range rows {
		var v struct {
			ID  int64   `json:"id"`
			Pad string  `json:"pad"`
			N   float64 `json:"n"`
			TS  int64   `json:"ts"`
		}
		if err := json.Unmarshal([]byte(r), &v); err != nil {
			return nil, err
		}
		b.Field(0).(*array.Int64Builder).Append(v.ID)
		b.Field(1).(*array.StringBuilder).Append(v.Pad)
		b.Field(2).(*array.Float64Builder).Append(v.N)
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(v.TS))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(as))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type arrowAck struct {
	Offsets []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"offsets"`
}

// TestProduceFetchKillArrow is the kill test on an arrow stream: 40k rows from 8
// concurrent HTTP clients over 8 partitions, half of the requests JSON produce and half
// Arrow IPC produce (every third of those to an explicit partition), a SIGKILL in the
// middle and a restart, then a clean restart: every acknowledged row is at its
// acknowledged offset with its exact values, offsets dense from 0.
func TestProduceFetchKillArrow(t *testing.T) {
	const total, clients, perReq, killAt, parts = 40_000, 8, 250, 15_000, 8
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	data := t.TempDir()
	ports := freePorts(t)
	p := startDev(t, data, ports, nil)
	hc := &http.Client{Timeout: 30 * time.Second}
	post := func(base, path, ctype string, body []byte) (int, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	const streams = "/v1/namespaces/default/streams"
	if code, b, err := post(p.http, streams, "application/json", []byte(fmt.Sprintf(`{"name":"ae2e","partitions":%d,"encoding":"arrow","schema":%s}`, parts, arrowE2ESchema))); err != nil || code != 201 {
		t.Fatalf("create: %d %s %v", code, b, err)
	}

	var (
		mu     sync.Mutex
		sent   = map[int]string{}          // id → its row
		acked  = map[int32]map[int64]int{} // partition → offset → id
		ackOf  = map[int]bool{}            // acknowledged ids
		maybe  = map[int]bool{}            // ids of a request that failed
		count  atomic.Int64                // acknowledged rows
		killed = make(chan struct{})
		procMu sync.Mutex
	)
	addr := p.http // the same after the restart (the same ports)
	go func() {
		for count.Load() < killAt {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		procMu.Lock()
		p.kill()
		t.Logf("SIGKILL after %d acknowledged rows", count.Load())
		p = startDev(t, data, ports, nil)
		procMu.Unlock()
		close(killed)
	}()
	per := total / clients
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cl), 19))
			for req, start := 0, cl*per; start < (cl+1)*per; req, start = req+1, start+perReq {
				end := min(start+perReq, (cl+1)*per)
				rows := make([]string, 0, end-start)
				mu.Lock()
				for id := start; id < end; id++ {
					r := arrowRow(id, rng)
					rows = append(rows, r)
					sent[id] = r
				}
				mu.Unlock()
				path, ctype := streams+"/ae2e/records", "application/json"
				var body []byte
				if req%2 == 0 {
					body = []byte(`{"records":[{"value":` + strings.Join(rows, `},{"value":`) + `}]}`)
				} else {
					var err error
					if body, err = arrowIPC(rows); err != nil {
						errs <- err
						return
					}
					ctype = "application/vnd.apache.arrow.stream"
					if req%3 == 1 {
						path += fmt.Sprintf("?partition=%d", req%parts)
					}
				}
				for attempt := 0; ; attempt++ {
					code, b, err := post(addr, path, ctype, body)
					if err == nil && code == 200 {
						var a arrowAck
						if err := json.Unmarshal(b, &a); err != nil || len(a.Offsets) != len(rows) {
							errs <- fmt.Errorf("client %d: answer %s: %v", cl, b, err)
							return
						}
						mu.Lock()
						for i, off := range a.Offsets {
							id := start + i
							m := acked[off.Partition]
							if m == nil {
								m = map[int64]int{}
								acked[off.Partition] = m
							}
							if prev, dup := m[off.Offset]; dup {
								mu.Unlock()
								errs <- fmt.Errorf("offset %d/%d acknowledged twice: ids %d and %d", off.Partition, off.Offset, prev, id)
								return
							}
							m[off.Offset] = id
							ackOf[id] = true
						}
						mu.Unlock()
						count.Add(int64(len(rows)))
						break
					}
					if err == nil && code < 500 {
						errs <- fmt.Errorf("client %d: produce: %d %s", cl, code, b)
						return
					}
					if ctx.Err() != nil || attempt > 600 {
						errs <- fmt.Errorf("client %d: produce ids %d..%d: %d %v", cl, start, end, code, err)
						return
					}
					mu.Lock()
					for id := start; id < end; id++ {
						maybe[id] = true
					}
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("kill never happened")
	}
	if got := count.Load(); got != total {
		t.Fatalf("acknowledged %d rows, want %d", got, total)
	}
	procMu.Lock()
	defer procMu.Unlock()
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		present := map[int]int{}
		n := 0
		for part := int32(0); part < parts; part++ {
			var next int64
			for {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%s/ae2e/partitions/%d/records?offset=%d&max_bytes=4194304", p.http, streams, part, next), nil)
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var f struct {
					Records []struct {
						Offset int64           `json:"offset"`
						Key    string          `json:"key"`
						Value  json.RawMessage `json:"value"`
					} `json:"records"`
					NextOffset    int64 `json:"next_offset"`
					HighWatermark int64 `json:"high_watermark"`
				}
				if resp.StatusCode != 200 || json.Unmarshal(b, &f) != nil {
					t.Fatalf("fetch partition %d offset %d: %d %s", part, next, resp.StatusCode, b)
				}
				for _, r := range f.Records {
					if r.Offset != next {
						t.Fatalf("partition %d: record at position %d has offset %d: offsets must be dense from 0 and in order", part, next, r.Offset)
					}
					var id int
					if _, err := fmt.Sscan(r.Key, &id); err != nil {
						t.Fatalf("partition %d offset %d: key %q", part, next, r.Key)
					}
					row, ok := sent[id]
					switch {
					case !ok:
						t.Fatalf("partition %d offset %d: id %d was never sent", part, next, id)
					case string(r.Value) != row:
						t.Fatalf("partition %d offset %d: id %d: %s, sent %s", part, next, id, r.Value, row)
					}
					if ackID, a := acked[part][next]; a && ackID != id {
						t.Fatalf("partition %d offset %d: holds id %d, but id %d was acknowledged there", part, next, id, ackID)
					} else if !a && !maybe[id] {
						t.Fatalf("partition %d offset %d: id %d is present but was neither acknowledged here nor in a failed request", part, next, id)
					}
					present[id]++
					next++
					n++
				}
				if f.NextOffset != next {
					t.Fatalf("partition %d: next_offset %d after reading up to %d", part, f.NextOffset, next)
				}
				if next >= f.HighWatermark {
					break
				}
			}
			for off, id := range acked[part] {
				if off >= next {
					t.Fatalf("partition %d: acknowledged offset %d (id %d) is past the end %d", part, off, id, next)
				}
			}
		}
		for id := range ackOf {
			if present[id] == 0 {
				t.Fatalf("acknowledged id %d is missing", id)
			}
		}
		for id, c := range present {
			if c > 1 && !maybe[id] {
				t.Fatalf("id %d present %d times but its request never failed", id, c)
			}
		}
		t.Logf("checked %d rows in %d partitions: %d acknowledged, %d retried after an unknown outcome", n, parts, len(ackOf), len(maybe))
	}
	check()
	if err := p.stop(ctx); err != nil {
		t.Fatal(err)
	}
	p = startDev(t, data, ports, nil)
	check()
}

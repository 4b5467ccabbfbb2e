// Package e2e runs `loam dev` as a real process and checks the write and read path end to
// end over HTTP: every acknowledged record is present at its acknowledged offset with its
// exact bytes, offsets are dense from 0 and in order, across a SIGKILL and restart.
package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/testserver"
)

func ptr[T any](v T) *T { return &v }

// sent is what a client sent for one record id.
type sent struct {
	key   string
	value []byte
}

// ledger records what producers were told.
type ledger struct {
	mu    sync.Mutex
	sent  map[int]sent            // every id ever sent
	acked map[int32]map[int64]int // partition → offset → id
	ackOf map[int]streamapi.RecordOffset
	maybe map[int]bool // ids in a request that failed (may be present)
	count atomic.Int64 // acknowledged records
}

func newLedger() *ledger {
	return &ledger{sent: map[int]sent{}, acked: map[int32]map[int64]int{}, ackOf: map[int]streamapi.RecordOffset{}, maybe: map[int]bool{}}
}

// makeRecord builds record id: half JSON values (exact text kept), half binary values that
// are not JSON; keyed records pick their partition by murmur2, the others name one.
func makeRecord(id int, rng *rand.Rand) (streamapi.Record, sent) {
	key := fmt.Sprintf("k-%d", id)
	var r streamapi.Record
	var value []byte
	if id%2 == 0 {
		value = []byte(fmt.Sprintf(`{"id":%d,"pad":"%x", "n":[1, 2.5,true,null]}`, id, rng.Uint64()))
		r.Value = json.RawMessage(value)
	} else {
		value = make([]byte, 64+rng.IntN(900))
		for i := range value {
			value[i] = byte(rng.Uint32())
		}
		value[0] = 0xff // never valid JSON
		binary.BigEndian.PutUint64(value[1:], uint64(id))
		r.ValueBase64 = value
	}
	r.Key = &key
	if id%3 == 0 {
		r.Partition = ptr(int32(id % 8))
	}
	r.Headers = streamapi.Headers{streamapi.StringHeader("id", fmt.Sprint(id))}
	return r, sent{key: key, value: value}
}

type e2eOpts struct {
	total   int
	clients int
	perReq  int
	killAt  int // acknowledged records before the SIGKILL; 0: no kill
	env     []string
	extra   []string
	class   string // the stream's durability class; "": standard
}

func runE2E(t *testing.T, o e2eOpts) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	data := t.TempDir()
	ports := freePorts(t)
	p := startDev(t, data, ports, o.env, o.extra...)
	c, err := streamapi.NewClient(p.http, streamapi.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "e2e", Partitions: ptr(int32(8)), Class: o.class}); err != nil {
		t.Fatal(err)
	}

	lg := newLedger()
	var (
		wg       sync.WaitGroup
		killed   = make(chan struct{})
		restarts atomic.Int32
		procMu   sync.Mutex
	)
	if o.killAt > 0 {
		go func() {
			for lg.count.Load() < int64(o.killAt) {
				if ctx.Err() != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			procMu.Lock()
			p.kill()
			t.Logf("SIGKILL after %d acknowledged records", lg.count.Load())
			p = startDev(t, data, ports, o.env, o.extra...)
			restarts.Add(1)
			procMu.Unlock()
			close(killed)
		}()
	}
	per := o.total / o.clients
	errs := make(chan error, o.clients)
	for cl := range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cl), 7))
			for start := cl * per; start < (cl+1)*per; start += o.perReq {
				end := min(start+o.perReq, (cl+1)*per)
				recs := make([]streamapi.Record, 0, end-start)
				lg.mu.Lock()
				for id := start; id < end; id++ {
					r, s := makeRecord(id, rng)
					recs = append(recs, r)
					lg.sent[id] = s
				}
				lg.mu.Unlock()
				for attempt := 0; ; attempt++ {
					resp, err := c.Produce(ctx, "default", "e2e", recs)
					if err == nil {
						lg.mu.Lock()
						for i, off := range resp.Offsets {
							id := start + i
							m := lg.acked[off.Partition]
							if m == nil {
								m = map[int64]int{}
								lg.acked[off.Partition] = m
							}
							if prev, dup := m[off.Offset]; dup {
								lg.mu.Unlock()
								errs <- fmt.Errorf("offset %d/%d acknowledged twice: ids %d and %d", off.Partition, off.Offset, prev, id)
								return
							}
							m[off.Offset] = id
							lg.ackOf[id] = off
						}
						lg.mu.Unlock()
						lg.count.Add(int64(len(recs)))
						break
					}
					if ctx.Err() != nil || attempt > 600 {
						errs <- fmt.Errorf("client %d: produce ids %d..%d: %w", cl, start, end, err)
						return
					}
					// The outcome is unknown (the process may have died after committing):
					// the ids may be present; retry them.
					lg.mu.Lock()
					for id := start; id < end; id++ {
						lg.maybe[id] = true
					}
					lg.mu.Unlock()
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
	if o.killAt > 0 {
		select {
		case <-killed:
		case <-ctx.Done():
			t.Fatal("kill never happened")
		}
	}
	if got := lg.count.Load(); got != int64(o.total) {
		t.Fatalf("acknowledged %d records, want %d", got, o.total)
	}
	procMu.Lock()
	defer procMu.Unlock()
	checkLog(ctx, t, c, lg)

	// A clean stop and start keeps everything too.
	if err := p.stop(ctx); err != nil {
		t.Fatal(err)
	}
	p = startDev(t, data, ports, o.env, o.extra...)
	checkLog(ctx, t, c, lg)
}

// checkLog fetches every partition from offset 0 and checks it against the ledger.
func checkLog(ctx context.Context, t *testing.T, c *streamapi.Client, lg *ledger) {
	t.Helper()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	present := map[int]int{}
	total := 0
	for part := int32(0); part < 8; part++ {
		var next int64
		for {
			resp, err := c.Fetch(ctx, "default", "e2e", part, next, 4<<20, 0)
			if err != nil {
				t.Fatalf("fetch partition %d offset %d: %v", part, next, err)
			}
			for _, r := range resp.Records {
				if r.Offset == nil || *r.Offset != next {
					t.Fatalf("partition %d: record at position %d has offset %v: offsets must be dense from 0 and in order", part, next, r.Offset)
				}
				val, err := r.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				idText := r.Headers.Get("id")
				var id int
				if _, err := fmt.Sscan(idText, &id); err != nil {
					t.Fatalf("partition %d offset %d: header id %q", part, next, idText)
				}
				s, ok := lg.sent[id]
				if !ok {
					t.Fatalf("partition %d offset %d: id %d was never sent", part, next, id)
				}
				if !bytes.Equal(val, s.value) || r.Key == nil || *r.Key != s.key {
					t.Fatalf("partition %d offset %d: id %d: bytes differ from what was sent", part, next, id)
				}
				if ackID, acked := lg.acked[part][next]; acked && ackID != id {
					t.Fatalf("partition %d offset %d: holds id %d, but id %d was acknowledged there", part, next, id, ackID)
				}
				if _, acked := lg.acked[part][next]; !acked && !lg.maybe[id] {
					t.Fatalf("partition %d offset %d: id %d is present but was neither acknowledged here nor in a failed request", part, next, id)
				}
				present[id]++
				next++
				total++
			}
			if resp.NextOffset != next {
				t.Fatalf("partition %d: next_offset %d after reading up to %d", part, resp.NextOffset, next)
			}
			if next >= resp.HighWatermark {
				break
			}
		}
		for off, id := range lg.acked[part] {
			if off >= next {
				t.Fatalf("partition %d: acknowledged offset %d (id %d) is past the end %d", part, off, id, next)
			}
		}
	}
	dups := 0
	for id, n := range present {
		if n > 1 {
			dups++
			if !lg.maybe[id] {
				t.Fatalf("id %d present %d times but its request never failed", id, n)
			}
		}
	}
	for id := range lg.ackOf {
		if present[id] == 0 {
			t.Fatalf("acknowledged id %d is missing", id)
		}
	}
	t.Logf("checked %d records in 8 partitions: %d acknowledged, %d retried after an unknown outcome, %d duplicated by retries", total, len(lg.ackOf), len(lg.maybe), dups)
}

// TestProduceFetchKill: 100k records from 8 concurrent HTTP clients over 8 partitions, a
// SIGKILL in the middle and a restart; then a clean restart.
func TestProduceFetchKill(t *testing.T) {
	runE2E(t, e2eOpts{total: 100_000, clients: 8, perReq: 500, killAt: 40_000})
}

// TestProduceFetchKillS3 is the same check with the data on a real S3 server (versitygw).
func TestProduceFetchKillS3(t *testing.T) {
	s3 := testserver.StartVersityGW(t)
	runE2E(t, e2eOpts{total: 100_000, clients: 8, perReq: 500, killAt: 40_000,
		env:   []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey, "AWS_REGION=us-east-1"},
		extra: []string{"--bucket", "s3://loam-e2e/data", "--s3-endpoint", s3.URL}})
}

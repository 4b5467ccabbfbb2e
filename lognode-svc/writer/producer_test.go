package writer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
)

// TestIdempotentProducers runs the write path with producers on a real sequencer, through
// the in-process client and over gRPC.
func TestIdempotentProducers(t *testing.T) {
	node := startSequencer(t)
	gcl, err := metagrpc.Dial(context.Background(), []string{node.RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gcl.Close() })
	for name, mc := range map[string]meta.Client{"local": server.NewLocalClient(node), "grpc": gcl} {
		t.Run(name, func(t *testing.T) { idempotentProducers(t, mc, name) })
	}
}

func idempotentProducers(t *testing.T, mc meta.Client, prefix string) {
	ctx := context.Background()
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Name: prefix + "-p", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := mc.InitProducer(ctx, "default", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := mc.InitProducer(ctx, "default", prefix+"-named", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	// PUTs take a random 0..15 ms, so a later object's PUT often ends before an earlier one's.
	bucket := &jitterBucket{Bucket: objstore.NewMem()}
	w := newTestWriter(t, bucket, mc, func(c *Config) {
		c.FlushInterval = 30 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	req := func(p int32, pr meta.Producer, seq int32, n int) Request {
		return Request{StreamID: st.ID, Partition: p, Batches: batchOf(t, n, "x"), Records: int64(n), MaxTimestamp: 1000,
			Producer: meta.ChunkProducer{ID: pr.ID, Epoch: pr.Epoch, BaseSequence: seq}}
	}
	write := func(r Request) (Result, error) {
		t.Helper()
		res, err := w.Write(ctx, []Request{r})
		if len(res) == 1 {
			return res[0], err
		}
		return Result{BaseOffset: -1}, err
	}
	hwm := func(p int32) int64 {
		_, s, err := mc.Lookup(ctx, st.ID, p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s.HighWatermark
	}

	// Two producers and a plain write to one partition at once: separate chunks, all commit.
	var wg sync.WaitGroup
	var r1, r2, r3 Result
	var e1, e2, e3 error
	wg.Add(3)
	go func() { defer wg.Done(); r1, e1 = write(req(0, p1, 0, 3)) }()
	go func() { defer wg.Done(); r2, e2 = write(req(0, p2, 0, 2)) }()
	go func() {
		defer wg.Done()
		res, err := w.Write(ctx, []Request{{StreamID: st.ID, Partition: 0, Batches: batchOf(t, 4, "plain"), Records: 4}})
		if err == nil {
			r3 = res[0]
		}
		e3 = err
	}()
	wg.Wait()
	if e1 != nil || e2 != nil || e3 != nil || hwm(0) != 9 {
		t.Fatalf("%v %v %v hwm %d", e1, e2, e3, hwm(0))
	}
	if r1.Duplicate || r2.Duplicate || r3.Duplicate {
		t.Fatal("first writes answered as duplicates")
	}

	// A retry (the answer was lost): the original offsets, nothing new written.
	got, err := write(req(0, p1, 0, 3))
	if err != nil || !got.Duplicate || got.BaseOffset != r1.BaseOffset || hwm(0) != 9 {
		t.Fatalf("retry: %+v %v (first at %d), hwm %d", got, err, r1.BaseOffset, hwm(0))
	}
	// Out of order: nothing written, a definite refusal.
	if _, err := write(req(0, p1, 7, 1)); !errors.Is(err, ErrCommitFailed) || !errors.Is(err, meta.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	// The name's next holder fences the old epoch.
	p2b, err := mc.InitProducer(ctx, "default", prefix+"-named", 0, -1)
	if err != nil || p2b.ID != p2.ID || p2b.Epoch != p2.Epoch+1 {
		t.Fatalf("%+v %v", p2b, err)
	}
	if _, err := write(req(0, p2, 2, 1)); !errors.Is(err, meta.ErrProducerFenced) {
		t.Fatalf("fenced: %v", err)
	}
	if _, err := write(req(1, meta.Producer{ID: 1 << 40}, 0, 1)); !errors.Is(err, meta.ErrUnknownProducer) {
		t.Fatalf("unknown: %v", err)
	}
	if hwm(0) != 9 || hwm(1) != 0 {
		t.Fatalf("refusals wrote: hwm %d %d", hwm(0), hwm(1))
	}

	// Pipelining: one producer's requests to one partition sent without waiting land in
	// separate objects that commit in sequence order.
	p3, err := mc.InitProducer(ctx, "default", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	const pipelined = 8
	res := make([]Result, pipelined)
	errs := make([]error, pipelined)
	for i := range pipelined {
		wg.Add(1)
		go func() { defer wg.Done(); res[i], errs[i] = write(req(1, p3, int32(2*i), 2)) }()
		time.Sleep(2 * time.Millisecond) // in sequence order
	}
	wg.Wait()
	for i := range pipelined {
		if errs[i] != nil || res[i].BaseOffset != int64(2*i) {
			t.Fatalf("pipelined %d: %+v %v", i, res[i], errs[i])
		}
	}

	// One write cannot put two requests of one partition together when one has a producer.
	if _, err := w.Write(ctx, []Request{req(1, p3, 16, 1), {StreamID: st.ID, Partition: 1, Batches: batchOf(t, 1, "y"), Records: 1}}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("%v", err)
	}
	if _, err := write(req(1, meta.Producer{ID: p3.ID, Epoch: -2}, 16, 1)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("%v", err)
	}
}

// jitterBucket delays each Put by a random 0..15 ms.
type jitterBucket struct{ objstore.Bucket }

func (b *jitterBucket) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	time.Sleep(time.Duration(rand.N(15)) * time.Millisecond)
	return b.Bucket.Put(ctx, key, body, opts...)
}

package writer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// slowCommits delays every CommitWal by d and counts them.
type slowCommits struct {
	meta.Client
	d       time.Duration
	commits atomic.Int64
}

func (s *slowCommits) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	time.Sleep(s.d)
	s.commits.Add(1)
	return s.Client.CommitWal(ctx, c)
}

// joinSetup is a writer on a real sequencer whose commits take 40 ms, a stream of two
// partitions and a producer.
func joinSetup(t *testing.T) (*Buffered, *slowCommits, meta.Stream, meta.Producer) {
	t.Helper()
	mc := &slowCommits{Client: server.NewLocalClient(startSequencer(t)), d: 40 * time.Millisecond}
	ctx := context.Background()
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Name: "j", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mc.InitProducer(ctx, "default", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWriter(t, objstore.NewMem(), mc, func(c *Config) {
		c.FlushInterval = time.Second // only conflicts and joins cut buffers here
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	return w, mc, st, p
}

func joinReq(t *testing.T, st meta.Stream, part int32, p meta.Producer, seq int32, n int) Request {
	return Request{StreamID: st.ID, Partition: part, Batches: batchOf(t, n, "j"), Records: int64(n), MaxTimestamp: 1000,
		Producer: meta.ChunkProducer{ID: p.ID, Epoch: p.Epoch, BaseSequence: seq}}
}

// TestPipelinedProducerJoins: a producer pipelining requests to a partition while earlier
// buffers of producers wait for their commit has its next requests join one chunk, so
// 24 requests commit in far fewer than 24 commits, at dense offsets in sequence order.
// A retry of one of them alone (its answer lost) is a duplicate with its own offsets.
func TestPipelinedProducerJoins(t *testing.T) {
	w, mc, st, p := joinSetup(t)
	ctx := context.Background()
	const n = 24
	waits := make([]func(context.Context) ([]Result, error), n)
	for i := range n {
		wait, err := w.Submit(ctx, []Request{joinReq(t, st, 0, p, int32(2*i), 2)})
		if err != nil {
			t.Fatal(err)
		}
		waits[i] = wait
		time.Sleep(time.Millisecond)
	}
	for i, wait := range waits {
		res, err := wait(ctx)
		if err != nil || res[0].BaseOffset != int64(2*i) || res[0].Duplicate {
			t.Fatalf("request %d: %+v %v", i, res, err)
		}
	}
	if c := mc.commits.Load(); c > n/2 {
		t.Fatalf("%d commits for %d pipelined requests: want their requests joined", c, n)
	}
	t.Logf("%d requests, %d commits", n, mc.commits.Load())
	res, err := w.Write(ctx, []Request{joinReq(t, st, 0, p, 2*13, 2)})
	if err != nil || !res[0].Duplicate || res[0].BaseOffset != 26 {
		t.Fatalf("retry of request 13 alone: %+v %v", res, err)
	}
	res, err = w.Write(ctx, []Request{joinReq(t, st, 0, p, 2*n, 1)})
	if err != nil || res[0].Duplicate || res[0].BaseOffset != 2*n {
		t.Fatalf("next: %+v %v", res, err)
	}
}

// TestJoinedRetryAndNewRefusedThenAlone: a retry of a committed request and the
// producer's next request join one chunk, which the sequencer refuses out of order (one
// chunk cannot be part duplicate, part new). Both are answered with a retriable refusal
// that is not out_of_order_sequence, and their retries, no longer joined, are answered
// each on its own: the duplicate with its original offset, the next one committed.
func TestJoinedRetryAndNewRefusedThenAlone(t *testing.T) {
	w, _, st, p := joinSetup(t)
	ctx := context.Background()
	first, err := w.Write(ctx, []Request{joinReq(t, st, 1, p, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	// Another producer's requests to partition 0 fill the commit order: two buffers cut.
	q, err := w.cfg.Meta.InitProducer(ctx, "default", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var fill []func(context.Context) ([]Result, error)
	for i := range 3 {
		wait, err := w.Submit(ctx, []Request{joinReq(t, st, 0, q, int32(i), 1)})
		if err != nil {
			t.Fatal(err)
		}
		fill = append(fill, wait)
	}
	retry, err := w.Submit(ctx, []Request{joinReq(t, st, 1, p, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	next, err := w.Submit(ctx, []Request{joinReq(t, st, 1, p, 2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	for _, wait := range [](func(context.Context) ([]Result, error)){retry, next} {
		res, err := wait(ctx)
		if !errors.Is(err, ErrCommitFailed) || errors.Is(err, meta.ErrOutOfOrderSequence) || len(res) != 1 ||
			!strings.Contains(res[0].Err.Error(), "retry it") {
			t.Fatalf("joined retry and next: %+v %v", res, err)
		}
	}
	for _, wait := range fill {
		if _, err := wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Write(ctx, []Request{joinReq(t, st, 1, p, 0, 2)})
	if err != nil || !res[0].Duplicate || res[0].BaseOffset != first[0].BaseOffset {
		t.Fatalf("retry alone: %+v %v", res, err)
	}
	res, err = w.Write(ctx, []Request{joinReq(t, st, 1, p, 2, 2)})
	if err != nil || res[0].Duplicate || res[0].BaseOffset != 2 {
		t.Fatalf("next alone: %+v %v", res, err)
	}
}

package fsm

import (
	"fmt"
	"sync"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// TestLookupsWhileApplying reads partitions while commits append to their tails and settle
// them (small blocks): every read sees a dense index from 0 to the high watermark it reads,
// whatever batch it lands between. Run with -race, it also checks that readers never touch
// what the applier writes.
func TestLookupsWhileApplying(t *testing.T) {
	defer func(b int, s uint64) { blockEntries, settleCommits = b, s }(blockEntries, settleCommits)
	blockEntries, settleCommits = 8, 16
	h := newHarness(t)
	s := h.stream("s", 4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for p := range int32(4) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				es, st, err := h.f.Lookup(s.ID, p, 0, MaxLookup)
				if err != nil {
					errs <- err
					return
				}
				next := int64(0)
				for _, e := range es {
					if e.BaseOffset != next {
						errs <- fmt.Errorf("partition %d: entry at %d, want %d (hwm %d)", p, e.BaseOffset, next, st.HighWatermark)
						return
					}
					next = e.End()
				}
				if next != st.HighWatermark {
					errs <- fmt.Errorf("partition %d: entries end at %d, high watermark %d", p, next, st.HighWatermark)
					return
				}
			}
		})
	}
	for i := range 400 {
		var cs []meta.CommitWal
		for j := range 1 + i%5 {
			c := meta.CommitWal{Object: fmt.Sprintf("wal/%05d-%d", i, j), CreatedMs: t0}
			for p := range int32(4) {
				if (i+j+int(p))%3 != 0 {
					c.Chunks = append(c.Chunks, chunk(s.ID, p, 1+int64(p), 0, 10))
				}
			}
			cs = append(cs, c)
		}
		if r := h.apply(t0, CommitWalBatch(cs)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkTails(t, h.f)
	// The events, published as batches applied and read only now, still hold exactly
	// what the index holds: later appends and settles did not touch them.
	got := map[int32][]meta.IndexEntry{}
	for _, ev := range h.events {
		for _, u := range ev.Partitions {
			got[u.Partition] = append(got[u.Partition], u.Added...)
		}
	}
	for p := range int32(4) {
		es, _, err := h.f.Lookup(s.ID, p, 0, MaxLookup)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(es) != fmt.Sprint(got[p]) {
			t.Fatalf("partition %d: events added\n%v\nindex holds\n%v", p, got[p], es)
		}
	}
}

package server

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestGroupCommit: commits that queue while the committer is busy go out in one Raft
// entry, each with its own answer (a failing one fails alone).
func TestGroupCommit(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	ctx := ctxT(t)
	c := NewLocalClient(n)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "g", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	n.commitGate = gate // before any commit: the committer reads it after a receive
	before := n.AppliedIndex()
	const commits = 10
	type out struct {
		i   int
		res meta.CommitResult
		err error
	}
	outs := make(chan out, commits)
	var wg sync.WaitGroup
	for i := range commits {
		wg.Go(func() {
			now := time.Now().UnixMilli()
			p := int32(0)
			if i == 7 {
				p = 5 // no such partition: fails alone (all or nothing: the whole commit)
			}
			res, err := c.CommitWal(ctx, meta.CommitWal{Object: fmt.Sprintf("wal/g/%d", i), CreatedMs: now, StampMs: now,
				Chunks: []meta.Chunk{{StreamID: s.ID, Partition: p, Records: 3, Length: 10}}, AllOrNothing: i == 7})
			outs <- out{i, res, err}
		})
	}
	for deadline := time.Now().Add(5 * time.Second); len(n.commitCh) < commits-1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d commits queued", len(n.commitCh))
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	close(outs)
	var bases []int64
	var index uint64
	for o := range outs {
		if o.i == 7 {
			if o.err == nil {
				t.Fatal("commit to a missing partition succeeded")
			}
			continue
		}
		if index == 0 {
			index = o.res.AppliedIndex
		}
		// One Raft entry: every commit answers its index. (Other entries, like the
		// leader registering its address, may come before it.)
		if o.err != nil || o.res.AppliedIndex != index || index <= before || o.res.Duplicate {
			t.Fatalf("commit %d: %+v %v (entry %d, before %d)", o.i, o.res, o.err, index, before)
		}
		bases = append(bases, o.res.BaseOffsets[0])
	}
	slices.Sort(bases)
	for i, b := range bases {
		if b != int64(3*i) {
			t.Fatalf("bases %v", bases)
		}
	}
	_, st, err := c.Lookup(ctx, s.ID, 0, 0, 100)
	if err != nil || st.HighWatermark != 27 {
		t.Fatalf("%+v %v", st, err)
	}
}

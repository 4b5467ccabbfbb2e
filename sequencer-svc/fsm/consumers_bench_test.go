package fsm

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// BenchmarkConsumerApply: applying one heartbeat (a renewal by one of 10 members sharing
// 100 partitions) and one offset commit of a member's 10 partitions.
//
//	go test ./sequencer-svc/fsm -run '^$' -bench ConsumerApply -benchtime 2000x
func BenchmarkConsumerApply(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "s.db"), Options{LazySync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	idx := uint64(0)
	apply := func(stamp int64, cmd *metapb.Command) *Result {
		cmd.StampMs = stamp
		data, _ := Encode(cmd)
		idx++
		r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(*Result)
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		return r
	}
	s := apply(t0, CreateStream(meta.StreamConfig{Name: "s", Partitions: 100})).Stream
	apply(t0, CommitWal(meta.CommitWal{Object: "wal/1", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 1000, 0, 100)}}))
	beat := func(ms int64, m string) meta.ConsumerAssignment {
		return apply(ms, ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "c", Stream: "s", Member: m, Session: 10 * time.Minute})).Consumer
	}
	for round := range 3 {
		for i := range 10 {
			beat(t0+int64(round), fmt.Sprintf("m%d", i))
		}
	}
	a := beat(t0+3, "m0")
	if len(a.Leases) != 10 {
		b.Fatalf("m0 holds %d", len(a.Leases))
	}
	b.Run("heartbeat", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			beat(t0+4, fmt.Sprintf("m%d", i%10))
		}
	})
	b.Run("commit-10", func(b *testing.B) {
		c := meta.ConsumerCommit{Namespace: "default", Consumer: "c", Stream: "s", Member: "m0"}
		for _, l := range a.Leases {
			c.Offsets = append(c.Offsets, meta.ConsumerOffset{Partition: l.Partition, Epoch: l.Epoch})
		}
		for i := 0; b.Loop(); i++ {
			c.Offsets[0].Offset = int64(i % 1000)
			apply(t0+4, CommitConsumerOffsets(c))
		}
	})
}

package fsm

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
)

// BenchmarkApplyProducerCommits: applying CommitWals whose 100 chunks each carry a producer
// (each producer writing its next sequence to its partition), next to the same commits
// without producers: the cost of the sequence checks and producer state.
//
//	go test ./sequencer-svc/fsm -run '^$' -bench ApplyProducerCommits -benchtime 2000x
func BenchmarkApplyProducerCommits(b *testing.B) {
	const parts = 100
	for _, producers := range []bool{false, true} {
		b.Run(fmt.Sprintf("producers=%v", producers), func(b *testing.B) {
			f, err := Open(filepath.Join(b.TempDir(), "s.db"), Options{LazySync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			idx := uint64(0)
			apply := func(data []byte) *Result {
				idx++
				return f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(*Result)
			}
			cs := CreateStream(meta.StreamConfig{Name: "s", Partitions: parts})
			cs.StampMs = t0
			data, _ := Encode(cs)
			apply(data)
			for range parts {
				ip := InitProducer("default", "", 0, -1, 0)
				ip.StampMs = t0
				data, _ := Encode(ip)
				apply(data)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				c := meta.CommitWal{Object: fmt.Sprintf("wal/standard/node-1/%026d.wal", i), CreatedMs: t0}
				for p := range parts {
					ch := meta.Chunk{StreamID: 1, Partition: int32(p), Records: 10, Offset: int64(p) * 8000, Length: 8000, MaxTimestamp: t0}
					if producers {
						ch.Producer = meta.ChunkProducer{ID: int64(p + 1), BaseSequence: int32(10 * i)}
					}
					c.Chunks = append(c.Chunks, ch)
				}
				cmd := CommitWal(c)
				cmd.StampMs = t0
				data, _ := Encode(cmd)
				b.StartTimer()
				if r := apply(data); r.Err != nil || r.Commit.Status != nil {
					b.Fatalf("%v %v", r.Err, r.Commit.Status)
				}
			}
		})
	}
}

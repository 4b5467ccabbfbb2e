package fsm

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
)

// BenchmarkApplyCommitWal applies CommitWal entries of 1000 chunks in batches of 16 (as
// Raft hands them over under load), fsync on or off. Encoding the commands is not timed.
func BenchmarkApplyCommitWal(b *testing.B) {
	for _, parts := range []int{100, 1000} {
		for _, nosync := range []bool{false, true} {
			b.Run(fmt.Sprintf("partitions=%d/nosync=%v", parts, nosync), func(b *testing.B) {
				f, err := Open(filepath.Join(b.TempDir(), "s.db"), Options{NoSync: nosync})
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				idx := uint64(1)
				mk := func(cmd []byte) *raft.Log { idx++; return &raft.Log{Index: idx, Type: raft.LogCommand, Data: cmd} }
				cs := CreateStream(meta.StreamConfig{Name: "s", Partitions: int32(parts)})
				cs.StampMs = t0
				data, _ := Encode(cs)
				f.Apply(mk(data))
				b.ResetTimer()
				for i := 0; i < b.N; i += 16 {
					b.StopTimer()
					var batch []*raft.Log
					for j := i; j < i+16 && j < b.N; j++ {
						c := meta.CommitWal{Object: fmt.Sprint("wal/", j), CreatedMs: t0}
						for p := range parts {
							c.Chunks = append(c.Chunks, meta.Chunk{StreamID: 1, Partition: int32(p), Records: 10, Length: 8000})
						}
						cmd := CommitWal(c)
						cmd.StampMs = t0
						data, _ := Encode(cmd)
						batch = append(batch, mk(data))
					}
					b.StartTimer()
					for _, r := range f.ApplyBatch(batch) {
						if r.(*Result).Err != nil {
							b.Fatal(r.(*Result).Err)
						}
					}
				}
			})
		}
	}
}

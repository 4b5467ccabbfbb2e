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

// BenchmarkApplyCommitWalBatch applies CommitWalBatch entries of 32 commits of 1 to 1000
// chunks each, as the sequencer's group commit proposes them under load (fsync off: the
// server runs the state lazily synced). Encoding is not timed; ns/op is per commit.
func BenchmarkApplyCommitWalBatch(b *testing.B) {
	const perEntry = 32
	for _, parts := range []int{1, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			f, err := Open(filepath.Join(b.TempDir(), "s.db"), Options{LazySync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			idx := uint64(1)
			cs := CreateStream(meta.StreamConfig{Name: "s", Partitions: int32(parts)})
			cs.StampMs = t0
			data, _ := Encode(cs)
			f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
			// Entries built ahead in rounds, so building them is not timed.
			const round = 64
			obj := 0
			build := func() []*raft.Log {
				var logs []*raft.Log
				for range round {
					var batch []meta.CommitWal
					for range perEntry {
						obj++
						c := meta.CommitWal{Object: fmt.Sprintf("wal/standard/node-1/%026d.wal", obj), CreatedMs: t0}
						for p := range parts {
							c.Chunks = append(c.Chunks, meta.Chunk{StreamID: 1, Partition: int32(p), Records: 100, Offset: int64(p) * 8000, Length: 8000, MaxTimestamp: t0})
						}
						batch = append(batch, c)
					}
					cmd := CommitWalBatch(batch)
					cmd.StampMs = t0
					data, _ := Encode(cmd)
					idx++
					logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
				}
				return logs
			}
			b.ResetTimer()
			for done := 0; done < b.N; {
				b.StopTimer()
				logs := build()
				b.StartTimer()
				for _, l := range logs {
					if done >= b.N {
						break
					}
					r := f.Apply(l).(*Result)
					if r.Err != nil || r.Commits[0].Err != nil {
						b.Fatal(r.Err, r.Commits[0].Err)
					}
					done += perEntry
				}
			}
			st := f.db.Stats().TxStats
			b.ReportMetric(float64(st.GetWrite())/float64(b.N/perEntry), "pagewrites/entry")
			b.ReportMetric(float64(st.GetSpill())/float64(b.N/perEntry), "spills/entry")
		})
	}
}

package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/sequencer-svc/raftlog"
	"github.com/loamhq/loam/shared/meta"
)

// flushBytes is a log node's full flush (spec §3: 8 MiB).
const flushBytes = 8 << 20

func benchCommit(parts int, obj string, id uint64, created int64) meta.CommitWal {
	c := meta.CommitWal{NodeID: "node-1", Object: obj, Class: meta.ClassStandard, CreatedMs: created, StampMs: created}
	per := int64(flushBytes / parts)
	var off int64 = 64
	for p := range parts {
		c.Chunks = append(c.Chunks, meta.Chunk{StreamID: id, Partition: int32(p), Records: 100, Offset: off, Length: per, MaxTimestamp: created - 5})
		off += per + 48
	}
	return c
}

// BenchmarkCommitWal measures CommitWal throughput (16 concurrent committers, fsync on)
// through the in-process and the gRPC client, and the Raft-log bytes each commit costs.
func BenchmarkCommitWal(b *testing.B) {
	for _, parts := range []int{1, 100, 1000} {
		for _, via := range []string{"local", "grpc"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", parts, via), func(b *testing.B) {
				cfg := testConfig(b, b.TempDir())
				cfg.NoSync = false
				n := startNode(b, cfg)
				defer n.Close()
				c := clients(b, n)[via]
				ctx := context.Background()
				s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "bench", Partitions: int32(parts)})
				if err != nil {
					b.Fatal(err)
				}
				now := time.Now().UnixMilli()
				entry, _ := fsm.Encode(fsm.CommitWal(benchCommit(parts, "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal", s.ID, now)))
				logBytes := raftlog.EntrySize(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: entry, AppendedAt: time.Now()}) + 8
				var seq atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := seq.Add(1)
						cw := benchCommit(parts, fmt.Sprintf("wal/standard/node-1/%026d.wal", i), s.ID, time.Now().UnixMilli())
						if _, err := c.CommitWal(ctx, cw); err != nil {
							b.Error(err)
							return
						}
					}
				})
				el := time.Since(start)
				b.ReportMetric(float64(b.N)/el.Seconds(), "commits/s")
				b.ReportMetric(float64(logBytes), "raftlog-bytes/commit")
				b.ReportMetric(100*float64(logBytes)/flushBytes, "raftlog-%-of-8MiB")
			})
		}
	}
}

package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/sequencer-svc/raftlog"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// flushBytes is a log node's full flush (8 MiB).
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

// raftLogBytes sums the stored size of the leader's Raft-log entries after index from (a
// key of 8 bytes each plus raftlog.EntrySize).
func raftLogBytes(tb testing.TB, n *Node, from uint64) int64 {
	var total int64
	last := n.raft.LastIndex()
	for i := from + 1; i <= last; i++ {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err != nil {
			tb.Fatalf("raft log %d: %v", i, err)
		}
		total += int64(raftlog.EntrySize(&l)) + 8
	}
	return total
}

// BenchmarkCommitWal measures CommitWal throughput (16 concurrent committers, fsync on)
// with 1 to 10,000 partitions touched per commit: on one voter through the in-process and
// the gRPC client, and on a three-voter loopback group through metagrpc (which settles on
// the leader) and through a gRPC client pinned to a follower (every commit forwarded). It
// reports the Raft-log bytes each commit cost (group commit puts several in one entry)
// and their share of the 8 MiB flush the commit describes.
func BenchmarkCommitWal(b *testing.B) {
	for _, parts := range []int{1, 100, 1000, 10000} {
		for _, via := range []string{"1voter-local", "1voter-grpc", "3voters-grpc", "3voters-follower"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", parts, via), func(b *testing.B) {
				var cfgs []Config
				if via[0] == '1' {
					cfgs = []Config{testConfig(b, b.TempDir())}
				} else {
					cfgs = clusterConfigs(b, 3)
				}
				for i := range cfgs {
					if len(cfgs) > 1 { // hashicorp/raft's 1 s timeouts: a loaded machine keeps its leader
						cfgs[i].HeartbeatTimeout, cfgs[i].ElectionTimeout, cfgs[i].LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
					}
					cfgs[i].NoSync = os.Getenv("LOAM_BENCH_NOSYNC") == "1"
					cfgs[i].SnapshotThreshold = 1 << 30 // keep the log to measure it
				}
				nodes := startAll(b, cfgs)
				leader := waitLeader(b, nodes)
				var c meta.Client
				switch via {
				case "1voter-local":
					c = NewLocalClient(leader)
				case "1voter-grpc", "3voters-grpc":
					var addrs []string
					for _, n := range nodes {
						addrs = append(addrs, n.RPCAddr())
					}
					g, err := metagrpc.Dial(context.Background(), addrs)
					if err != nil {
						b.Fatal(err)
					}
					defer g.Close()
					c = g
				case "3voters-follower":
					g, err := metagrpc.Dial(context.Background(), []string{followersOf(nodes, leader)[0].RPCAddr()}, metagrpc.WithoutLeaderHeader())
					if err != nil {
						b.Fatal(err)
					}
					defer g.Close()
					c = g
				}
				ctx := context.Background()
				s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "bench", Partitions: int32(parts)})
				if err != nil {
					b.Fatal(err)
				}
				// One commit outside the timing, which also settles metagrpc on the leader.
				if _, err := c.CommitWal(ctx, benchCommit(parts, "wal/standard/node-1/warm.wal", s.ID, time.Now().UnixMilli())); err != nil {
					b.Fatal(err)
				}
				from := leader.raft.LastIndex()
				// The load generator shares the two cores with the voters: it builds the chunk
				// list once and sends it with a new object key each time.
				tmpl := benchCommit(parts, "", s.ID, time.Now().UnixMilli())
				var seq atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := seq.Add(1)
						cw := tmpl // created when the run started: a run is far shorter than meta.StaleAfter
						cw.Object = fmt.Sprintf("wal/standard/node-1/%026d.wal", i)
						cw.StampMs = time.Now().UnixMilli()
						if _, err := c.CommitWal(ctx, cw); err != nil {
							b.Error(err)
							return
						}
					}
				})
				el := time.Since(start)
				b.StopTimer()
				logBytes := float64(raftLogBytes(b, leader, from)) / float64(b.N)
				b.ReportMetric(float64(b.N)/float64(leader.raft.LastIndex()-from), "commits/entry")
				b.ReportMetric(float64(b.N)/el.Seconds(), "commits/s")
				b.ReportMetric(logBytes, "raftlog-bytes/commit")
				b.ReportMetric(100*logBytes/flushBytes, "raftlog-%-of-8MiB")
			})
		}
	}
}

// TestSnapshotFigures (LOAM_FIGURES=1) measures snapshot bytes per partition: 10,000
// partitions with 0, 10 and 100 index entries each, snapshotted, the snapshot file's size
// divided by the partition count.
func TestSnapshotFigures(t *testing.T) {
	if os.Getenv("LOAM_FIGURES") != "1" {
		t.Skip("figures: set LOAM_FIGURES=1")
	}
	const parts = 10000
	var empty int64
	for _, entries := range []int{0, 10, 100} {
		cfg := testConfig(t, t.TempDir())
		cfg.SnapshotThreshold = 1 << 30
		n := startNode(t, cfg)
		c := NewLocalClient(n)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "snap", Partitions: parts})
		if err != nil {
			t.Fatal(err)
		}
		for i := range entries {
			cw := benchCommit(parts, fmt.Sprintf("wal/standard/node-1/%026d.wal", i), s.ID, time.Now().UnixMilli())
			if _, err := c.CommitWal(ctx, cw); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := n.Snapshot(); err != nil {
			t.Fatal(err)
		}
		metas, err := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*", "state.bin"))
		if err != nil || len(metas) != 1 {
			t.Fatalf("snapshot files %v %v", metas, err)
		}
		st, err := os.Stat(metas[0])
		if err != nil {
			t.Fatal(err)
		}
		if entries == 0 {
			empty = st.Size()
		}
		perEntry := 0.0
		if entries > 0 {
			perEntry = float64(st.Size()-empty) / float64(parts*entries)
		}
		t.Logf("%d partitions x %d index entries: snapshot %d bytes = %.0f bytes/partition (%.1f bytes per index entry over the empty case)",
			parts, entries, st.Size(), float64(st.Size())/parts, perEntry)
		n.Close()
	}
}

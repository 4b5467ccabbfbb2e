package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestAppendSegmentsThroughFollowers appends a quorum partition's segments through
// followers only (the in-process client of one, a gRPC client pinned to another): the
// append is forwarded to the leader, a retry answers nil, refusals keep their sentinels
// across the wire, and Lookup finds the segments.
func TestAppendSegmentsThroughFollowers(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	fs := followersOf(nodes, leader)
	g, err := metagrpc.Dial(context.Background(), []string{fs[1].RPCAddr()}, metagrpc.WithoutLeaderHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for name, c := range map[string]meta.Client{"local": NewLocalClient(fs[0]), "grpc": g} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			qc, ok := c.(meta.QuorumIndexClient)
			if !ok {
				t.Fatalf("%T is not a meta.QuorumIndexClient", c)
			}
			st, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: "default", Name: "q-" + name, Partitions: 1, Class: meta.ClassQuorum})
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.AcquireLease(ctx, st.ID, 0, meta.LeaseOffload, "journal-j0", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			seg := func(base, n int64, obj string) meta.IndexEntry {
				return meta.IndexEntry{BaseOffset: base, Count: n, Kind: meta.KindSegment, Object: obj, Offset: 40, Length: 10 * n}
			}
			a := meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{seg(0, 10, "seg/"+name+"/a")}, StampMs: time.Now().UnixMilli()}
			if err := qc.AppendSegments(ctx, a); err != nil {
				t.Fatal(err)
			}
			if err := qc.AppendSegments(ctx, a); err != nil {
				t.Fatalf("retry: %v", err)
			}
			err = qc.AppendSegments(ctx, meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{seg(0, 10, "seg/"+name+"/b")}, StampMs: time.Now().UnixMilli()})
			if !errors.Is(err, meta.ErrIndexChanged) {
				t.Fatalf("a second segment of the range: %v", err)
			}
			stale := l
			stale.Epoch++
			err = qc.AppendSegments(ctx, meta.SegmentAppend{Lease: stale, Entries: []meta.IndexEntry{seg(10, 5, "seg/"+name+"/c")}, StampMs: time.Now().UnixMilli()})
			if !errors.Is(err, meta.ErrLeaseLost) {
				t.Fatalf("a stale lease: %v", err)
			}
			bad := a
			bad.Entries = []meta.IndexEntry{{BaseOffset: 10, Count: 1, Kind: meta.KindWAL, Object: "w", Length: 1}}
			if err := qc.AppendSegments(ctx, bad); !errors.Is(err, meta.ErrInvalidArgument) {
				t.Fatalf("a wal entry: %v", err)
			}
			es, ps, err := c.Lookup(ctx, st.ID, 0, 0, 10)
			if err != nil || len(es) != 1 || es[0].Object != "seg/"+name+"/a" || ps.HighWatermark != 10 {
				t.Fatalf("lookup: %+v %+v %v", es, ps, err)
			}
		})
	}
}

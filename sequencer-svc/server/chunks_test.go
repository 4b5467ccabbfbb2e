package server

import (
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestCommitWalPerChunkService: both clients get per-chunk answers (a deleted stream's
// chunk refused alone, the others committed); a raw request without per_chunk (a client
// that predates per-chunk answers) gets the whole-commit refusal it understands.
func TestCommitWalPerChunkService(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	ctx := ctxT(t)
	for name, c := range clients(t, n) {
		t.Run(name, func(t *testing.T) {
			a, err := c.CreateStream(ctx, meta.StreamConfig{Name: name + "-a", Partitions: 1})
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.CreateStream(ctx, meta.StreamConfig{Name: name + "-b", Partitions: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteStream(ctx, "default", b.Name); err != nil {
				t.Fatal(err)
			}
			cw := meta.CommitWal{Object: "wal/" + name, CreatedMs: t0, StampMs: t0, Chunks: []meta.Chunk{
				{StreamID: a.ID, Records: 2, Length: 10}, {StreamID: b.ID, Records: 1, Offset: 10, Length: 10}, {StreamID: a.ID, Partition: 1, Records: 1, Offset: 20, Length: 10}}}
			res, err := c.CommitWal(ctx, cw)
			if err != nil {
				t.Fatal(err)
			}
			want := []meta.ChunkStatus{meta.ChunkCommitted, meta.ChunkStreamNotFound, meta.ChunkPartitionNotFound}
			if !reflect.DeepEqual(res.BaseOffsets, []int64{0, -1, -1}) || !reflect.DeepEqual(res.Status, want) || res.Duplicate {
				t.Fatalf("%+v", res)
			}
			again, err := c.CommitWal(ctx, cw)
			if err != nil || !again.Duplicate || !reflect.DeepEqual(again.Status, want) || !reflect.DeepEqual(again.BaseOffsets, res.BaseOffsets) {
				t.Fatalf("retry %+v %v", again, err)
			}
			cw.Object, cw.AllOrNothing = cw.Object+"-whole", true
			if _, err := c.CommitWal(ctx, cw); !errors.Is(err, meta.ErrStreamNotFound) {
				t.Fatalf("all or nothing: %v", err)
			}
		})
	}
	// A client of the wire protocol that predates per_chunk.
	conn, err := grpc.NewClient(n.RPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = metapb.NewSequencerClient(conn).CommitWal(ctx, &metapb.CommitWalRequest{Object: "wal/old", CreatedMs: t0, StampMs: t0,
		Chunks: []*metapb.Chunk{{StreamId: 1, Records: 1, Length: 1}, {StreamId: 99, Records: 1, Offset: 1, Length: 1}}})
	if !errors.Is(metagrpc.FromStatus(err), meta.ErrStreamNotFound) {
		t.Fatalf("old client: %v", err)
	}
}

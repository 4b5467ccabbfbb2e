package metapb

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"google.golang.org/protobuf/proto"
)

// Golden bytes of the per-chunk CommitWal messages: a change of these bytes breaks clients
// and servers of other versions.
func TestCommitWalWireGolden(t *testing.T) {
	res := meta.CommitResult{BaseOffsets: []int64{7, -1, 0}, Status: []meta.ChunkStatus{meta.ChunkCommitted, meta.ChunkStreamNotFound, meta.ChunkCommitted},
		Duplicate: true, AppliedIndex: 42}
	req := meta.CommitWal{NodeID: "n1", Object: "wal/o", Class: "standard", CreatedMs: 1000, StampMs: 1005,
		Chunks: []meta.Chunk{{StreamID: 1, Partition: 2, Records: 3, Offset: 64, Length: 100, MaxTimestamp: 999}}}
	for _, c := range []struct {
		name string
		msg  proto.Message
		hex  string
		back func([]byte) any
		want any
	}{
		{"response", FromCommitResult(res),
			"0a0c07ffffffffffffffffff0100100118" + "2a" + "2203000100",
			func(b []byte) any { var m CommitWalResponse; mustUnmarshal(t, b, &m); return ToCommitResult(&m) }, res},
		{"request", FromCommitWal(req),
			"0a026e31120577616c2f6f1a087374616e6461726420e80728ed07320d0801100218032040286430e7073801",
			func(b []byte) any { var m CommitWalRequest; mustUnmarshal(t, b, &m); return ToCommitWal(&m) }, req},
	} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex {
			t.Fatalf("%s: bytes changed:\n got %s\nwant %s", c.name, got, c.hex)
		}
		if got := c.back(b); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s: round trip %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestCommitWalOlderPeers: a request of a client that predates per-chunk answers (no
// per_chunk) asks for all or nothing; a response of a sequencer that predates them (no
// chunk_status) says every chunk committed; a status this version does not know is a
// refusal.
func TestCommitWalOlderPeers(t *testing.T) {
	old, _ := proto.Marshal(&CommitWalRequest{Object: "wal/o", Chunks: []*Chunk{{StreamId: 1, Records: 1, Length: 1}}})
	var req CommitWalRequest
	mustUnmarshal(t, old, &req)
	if c := ToCommitWal(&req); !c.AllOrNothing {
		t.Fatalf("old request: %+v", c)
	}
	oldResp, _ := proto.Marshal(&CommitWalResponse{BaseOffsets: []int64{4}, AppliedIndex: 9})
	var resp CommitWalResponse
	mustUnmarshal(t, oldResp, &resp)
	if r := ToCommitResult(&resp); r.Status != nil || r.ChunkErr(0) != nil || r.Committed() != 1 {
		t.Fatalf("old response: %+v", r)
	}
	r := ToCommitResult(&CommitWalResponse{BaseOffsets: []int64{-1, -1}, ChunkStatus: []ChunkStatus{9, 1000}})
	for i := range 2 {
		if err := r.ChunkErr(i); !errors.Is(err, meta.ErrChunkRefused) || errors.Is(err, meta.ErrStreamNotFound) {
			t.Fatalf("unknown status %d: %v", i, err)
		}
	}
	if r.Committed() != 0 {
		t.Fatalf("committed %d", r.Committed())
	}
}

func mustUnmarshal(t *testing.T, b []byte, m proto.Message) {
	t.Helper()
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
}

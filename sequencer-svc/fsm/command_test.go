package fsm

import (
	"math"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

func sampleCommit(n int) meta.CommitWal {
	c := meta.CommitWal{NodeID: "node-1", Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal",
		Class: meta.ClassStandard, CreatedMs: t0}
	var off int64 = 64
	for i := range n {
		c.Chunks = append(c.Chunks, meta.Chunk{StreamID: uint64(1 + i/50), Partition: int32(i % 50), Records: 120,
			Offset: off, Length: 8000, MaxTimestamp: t0 - 30})
		off += 8000 + 40 // a chunk header between chunks
	}
	return c
}

func TestCommitWalRoundTrip(t *testing.T) {
	for _, c := range []meta.CommitWal{
		sampleCommit(1), sampleCommit(1000),
		{Object: "o", CreatedMs: -5, Chunks: []meta.Chunk{
			{StreamID: math.MaxUint64, Partition: math.MinInt32, Records: -1, Offset: math.MaxInt64, Length: math.MaxInt64, MaxTimestamp: math.MinInt64},
			{StreamID: 0, Partition: math.MaxInt32, Records: 1, Offset: math.MinInt64, Length: 3},
			{StreamID: 0, Partition: 7},
		}},
	} {
		b, err := Encode(CommitWal(c))
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCommitWal(cmd.GetCommitWal())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
		}
	}
}

// TestCommitWalEntrySize pins the Raft entry cost of a commit: the issue budget is 0.2 %
// of ingested bytes, so a chunk must cost tens of bytes at most.
func TestCommitWalEntrySize(t *testing.T) {
	one, _ := Encode(CommitWal(sampleCommit(1)))
	many, _ := Encode(CommitWal(sampleCommit(1000)))
	perChunk := float64(len(many)-len(one)) / 999
	t.Logf("entry bytes: 1 chunk %d, 1000 chunks %d (%.1f per chunk)", len(one), len(many), perChunk)
	if perChunk > 12 || len(one) > 104 {
		t.Fatalf("commit entries too large: %.1f bytes per chunk, %d for one chunk", perChunk, len(one))
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, cmd := range []func() []byte{
		func() []byte { b, _ := Encode(CommitWal(sampleCommit(3))); return b },
		func() []byte { b, _ := Encode(CreateStream(meta.StreamConfig{Name: "s", Partitions: 3})); return b },
		func() []byte { b, _ := Encode(DeleteStream("default", "s")); return b },
		func() []byte { b, _ := Encode(goldenSwapCommand()); return b },
		func() []byte { b, _ := Encode(AcquireLease(1, 0, "segment", "h", 1000)); return b },
		func() []byte { b, _ := Encode(TrimPartition(1, 0, 5)); return b },
	} {
		f.Add(cmd())
	}
	f.Add([]byte{0x32, 0x02, 0x28, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, err := Decode(b)
		if err != nil {
			return
		}
		w := cmd.GetCommitWal()
		if w == nil {
			return
		}
		c, err := DecodeCommitWal(w)
		if err != nil {
			return
		}
		// Invariant: a decoded commit re-encodes to the same chunks.
		b2, err := Encode(CommitWal(c))
		if err != nil {
			t.Fatal(err)
		}
		cmd2, _ := Decode(b2)
		c2, err := DecodeCommitWal(cmd2.GetCommitWal())
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-encode differs: %v\n%+v\n%+v", err, c, c2)
		}
	})
}

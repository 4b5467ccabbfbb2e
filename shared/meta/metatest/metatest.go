// Package metatest is the conformance suite of the sequencer behaviours the background
// functions (segmenter, compaction, retention, GC) and the log nodes rely on: leases and
// epochs, SwapIndex and its errors, TrimPartition, Lookup's bounds, Referenced, the retired
// set, the basics of CommitWal, idempotent producers (InitProducer and producer chunks) and
// named consumers (heartbeats, fenced commits, describe, list, delete and reset), quorum
// placement (leader zone hints) and partition moves (request, seal, complete, cancel). It runs over the real sequencer (sequencer-svc's in-process client on
// a single-voter Raft group) and over the in-memory double metafake, so the double cannot
// drift from the sequencer unnoticed.
//
// The suite shares one Client between its subtests and isolates them by giving each its
// own streams and object keys, so a real sequencer is started once. Subtests run one after
// another. Lease expiry is waited out on the real clock (a few hundred milliseconds).
package metatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Client is what the suite drives: the background-work subset of meta.Client and what it
// needs to set up state (CreateStream, CommitWal). Every meta.Client is one.
type Client interface {
	CreateStream(ctx context.Context, cfg meta.StreamConfig) (meta.Stream, error)
	ListNamespaces(ctx context.Context) ([]string, error)
	ListStreams(ctx context.Context, ns string) ([]meta.Stream, error)
	CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error)
	Lookup(ctx context.Context, streamID uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error)
	AcquireLease(ctx context.Context, streamID uint64, partition int32, kind, holder string, ttl time.Duration) (meta.Lease, error)
	ReleaseLease(ctx context.Context, l meta.Lease) error
	SwapIndex(ctx context.Context, s meta.IndexSwap) error
	TrimPartition(ctx context.Context, streamID uint64, partition int32, logStart int64) (meta.PartitionState, error)
	ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error)
	ForgetRetired(ctx context.Context, keys []string) error
	Referenced(ctx context.Context, keys []string) ([]bool, error)

	// Idempotent producers and named consumers (producers.go).
	InitProducer(ctx context.Context, ns, name string, id int64, epoch int16) (meta.Producer, error)
	ConsumerHeartbeat(ctx context.Context, h meta.ConsumerHeartbeat) (meta.ConsumerAssignment, error)
	CommitConsumerOffsets(ctx context.Context, c meta.ConsumerCommit) error
	DescribeConsumer(ctx context.Context, ns, consumer string) (meta.ConsumerState, error)
	ListConsumers(ctx context.Context, ns string) ([]string, error)
	DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error
	ResetConsumerOffsets(ctx context.Context, r meta.ConsumerReset) ([]meta.ConsumerOffset, error)

	// Quorum placement and partition moves (placement.go).
	CreateJournal(ctx context.Context, j meta.Journal) (meta.Journal, error)
	ListJournals(ctx context.Context) (meta.Placement, error)
	AssignJournalPartitions(ctx context.Context, streamID uint64, partitions []int32, journal string) error
	SealJournalMove(ctx context.Context, m meta.JournalMove) error
	CompleteJournalMove(ctx context.Context, streamID uint64, partition int32, journal string, end int64) error
}

// Run runs the suite over c.
func Run(t *testing.T, c Client) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"Streams", testStreams},
		{"CommitWal", testCommitWal},
		{"Lookup", testLookup},
		{"Leases", testLeases},
		{"LeaseExpiry", testLeaseExpiry},
		{"SwapIndex", testSwapIndex},
		{"SwapIndexErrors", testSwapIndexErrors},
		{"TrimPartition", testTrimPartition},
		{"Retired", testRetired},
		{"Producers", testProducers},
		{"ProducerChunks", testProducerChunks},
		{"Consumers", testConsumers},
		{"ConsumerDeleteReset", testConsumerDeleteReset},
		{"Schemas", testSchemas},
		{"Placement", testPlacement},
	}
	run := fmt.Sprintf("%08x", rand.Uint32())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tc.fn(t, &suite{c: c, ctx: ctx, prefix: "wal/standard/mt" + run + strings.ToLower(tc.name) + "/"})
		})
	}
}

type suite struct {
	c      Client
	ctx    context.Context
	prefix string // of every object key the subtest uses
	n      int
}

// stream creates a stream of n partitions under a fresh name.
func (s *suite) stream(t *testing.T, partitions int32) meta.Stream {
	t.Helper()
	s.n++
	st, err := s.c.CreateStream(s.ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: fmt.Sprintf("mt-%s-%d", strings.Trim(s.prefix[len("wal/standard/"):], "/"), s.n), Partitions: partitions})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	if st.ID == 0 || st.Partitions != partitions {
		t.Fatalf("CreateStream = %+v", st)
	}
	return st
}

// key returns the subtest's object key name.
func (s *suite) key(name string) string { return s.prefix + name + ".wal" }

// commit commits one WAL object whose chunks are given as (partition, records, length),
// laid out one after another from byte 16.
func (s *suite) commit(t *testing.T, id uint64, object string, chunks ...[3]int64) meta.CommitResult {
	t.Helper()
	res, err := s.c.CommitWal(s.ctx, s.commitReq(id, object, chunks...))
	if err != nil {
		t.Fatalf("CommitWal %s: %v", object, err)
	}
	if len(res.BaseOffsets) != len(chunks) {
		t.Fatalf("CommitWal %s: %d base offsets for %d chunks", object, len(res.BaseOffsets), len(chunks))
	}
	return res
}

func (s *suite) commitReq(id uint64, object string, chunks ...[3]int64) meta.CommitWal {
	now := time.Now().UnixMilli()
	c := meta.CommitWal{NodeID: "n1", Object: object, Class: meta.ClassStandard, CreatedMs: now, StampMs: now}
	off := int64(16)
	for i, ch := range chunks {
		c.Chunks = append(c.Chunks, meta.Chunk{StreamID: id, Partition: int32(ch[0]), Records: ch[1], Offset: off, Length: ch[2], MaxTimestamp: now + int64(i)})
		off += ch[2]
	}
	return c
}

func (s *suite) lookup(t *testing.T, id uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState) {
	t.Helper()
	es, st, err := s.c.Lookup(s.ctx, id, p, from, max)
	if err != nil {
		t.Fatalf("Lookup(%d/%d from %d max %d): %v", id, p, from, max, err)
	}
	return es, st
}

func (s *suite) referenced(t *testing.T, keys ...string) []bool {
	t.Helper()
	r, err := s.c.Referenced(s.ctx, keys)
	if err != nil || len(r) != len(keys) {
		t.Fatalf("Referenced(%v) = %v, %v", keys, r, err)
	}
	return r
}

// retired lists the subtest's objects in the retired set.
func (s *suite) retired(t *testing.T) []meta.RetiredObject {
	t.Helper()
	var out []meta.RetiredObject
	after := s.prefix
	for {
		page, err := s.c.ListRetired(s.ctx, after, 2)
		if err != nil {
			t.Fatalf("ListRetired after %q: %v", after, err)
		}
		for _, r := range page {
			if !strings.HasPrefix(r.Key, s.prefix) {
				return out
			}
			out = append(out, r)
		}
		if len(page) < 2 {
			return out
		}
		after = page[len(page)-1].Key
	}
}

func retiredKeys(rs []meta.RetiredObject) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key
	}
	return out
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// segment returns a segment entry covering es.
func segment(key string, es ...meta.IndexEntry) meta.IndexEntry {
	var n int64
	for _, e := range es {
		n += e.Length
	}
	return meta.IndexEntry{BaseOffset: es[0].BaseOffset, Count: es[len(es)-1].End() - es[0].BaseOffset, Kind: meta.KindSegment,
		Object: key, Offset: 32, Length: n, MaxTimestamp: es[len(es)-1].MaxTimestamp}
}

// sameEntries compares what the index keeps exactly (MaxTimestamp aside).
func sameEntries(a, b []meta.IndexEntry) bool {
	return slices.EqualFunc(a, b, func(x, y meta.IndexEntry) bool {
		x.MaxTimestamp, y.MaxTimestamp = 0, 0
		return x == y
	})
}

func testStreams(t *testing.T, s *suite) {
	a, b := s.stream(t, 3), s.stream(t, 1)
	if a.ID == b.ID {
		t.Fatalf("two streams with ID %d", a.ID)
	}
	nss, err := s.c.ListNamespaces(s.ctx)
	if err != nil || !slices.Contains(nss, meta.DefaultNS) {
		t.Fatalf("ListNamespaces = %v, %v", nss, err)
	}
	sts, err := s.c.ListStreams(s.ctx, meta.DefaultNS)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, st := range sts {
		if st.ID == a.ID && st.Partitions == 3 || st.ID == b.ID && st.Partitions == 1 {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("ListStreams has %d of the 2 new streams: %+v", found, sts)
	}
	// Every partition starts empty.
	for p := range int32(3) {
		es, st := s.lookup(t, a.ID, p, 0, 10)
		if len(es) != 0 || st.LogStart != 0 || st.HighWatermark != 0 || st.Bytes != 0 || st.StreamID != a.ID || st.Partition != p {
			t.Fatalf("new partition %d: %v %+v", p, es, st)
		}
	}
}

func testCommitWal(t *testing.T, s *suite) {
	st := s.stream(t, 2)
	obj := s.key("a")
	res := s.commit(t, st.ID, obj, [3]int64{0, 10, 100}, [3]int64{0, 5, 50}, [3]int64{1, 7, 70})
	if !slices.Equal(res.BaseOffsets, []int64{0, 10, 0}) || res.Duplicate {
		t.Fatalf("CommitWal = %+v, want base offsets [0 10 0]", res)
	}
	es, ps := s.lookup(t, st.ID, 0, 0, 10)
	want := []meta.IndexEntry{
		{BaseOffset: 0, Count: 10, Kind: meta.KindWAL, Object: obj, Offset: 16, Length: 100},
		{BaseOffset: 10, Count: 5, Kind: meta.KindWAL, Object: obj, Offset: 116, Length: 50},
	}
	if !sameEntries(es, want) || ps.HighWatermark != 15 || ps.LogStart != 0 || ps.Bytes != 150 {
		t.Fatalf("partition 0 after commit: %+v %+v", es, ps)
	}
	if _, ps := s.lookup(t, st.ID, 1, 0, 0); ps.HighWatermark != 7 || ps.Bytes != 70 {
		t.Fatalf("partition 1 after commit: %+v", ps)
	}
	// A retry of the same object answers the first commit's offsets and changes nothing.
	again, err := s.c.CommitWal(s.ctx, s.commitReq(st.ID, obj, [3]int64{0, 10, 100}, [3]int64{0, 5, 50}, [3]int64{1, 7, 70}))
	if err != nil || !again.Duplicate || !slices.Equal(again.BaseOffsets, res.BaseOffsets) {
		t.Fatalf("retried CommitWal = %+v, %v", again, err)
	}
	if _, ps := s.lookup(t, st.ID, 0, 0, 0); ps.HighWatermark != 15 {
		t.Fatalf("a retried commit moved the high watermark to %d", ps.HighWatermark)
	}
	// The next object's offsets follow.
	if res := s.commit(t, st.ID, s.key("b"), [3]int64{0, 3, 30}); res.BaseOffsets[0] != 15 {
		t.Fatalf("second object at %d, want 15", res.BaseOffsets[0])
	}
	if r := s.referenced(t, obj, s.key("b"), s.key("never")); !slices.Equal(r, []bool{true, true, false}) {
		t.Fatalf("Referenced = %v", r)
	}
	// Malformed commits.
	bad := s.commitReq(st.ID, "", [3]int64{0, 1, 10})
	_, err = s.c.CommitWal(s.ctx, bad)
	wantErr(t, "CommitWal without an object", err, meta.ErrInvalidArgument)
	bad = s.commitReq(st.ID, s.key("c"))
	_, err = s.c.CommitWal(s.ctx, bad)
	wantErr(t, "CommitWal without chunks", err, meta.ErrInvalidArgument)
	bad = s.commitReq(st.ID, s.key("c"), [3]int64{0, 0, 10})
	_, err = s.c.CommitWal(s.ctx, bad)
	wantErr(t, "CommitWal of a chunk without records", err, meta.ErrInvalidArgument)
	bad = s.commitReq(st.ID, s.key("c"), [3]int64{0, 1, 0})
	_, err = s.c.CommitWal(s.ctx, bad)
	wantErr(t, "CommitWal of an empty chunk", err, meta.ErrInvalidArgument)
	if _, ps := s.lookup(t, st.ID, 0, 0, 0); ps.HighWatermark != 18 {
		t.Fatalf("refused commits moved the high watermark to %d", ps.HighWatermark)
	}
}

func testLookup(t *testing.T, s *suite) {
	st := s.stream(t, 2)
	for i := range 5 {
		s.commit(t, st.ID, s.key(fmt.Sprint(i)), [3]int64{0, 10, 100})
	}
	all, ps := s.lookup(t, st.ID, 0, 0, 100)
	if len(all) != 5 || ps.HighWatermark != 50 {
		t.Fatalf("Lookup all: %d entries, %+v", len(all), ps)
	}
	// from inside an entry starts with that entry; max bounds the answer.
	if es, _ := s.lookup(t, st.ID, 0, 25, 100); !sameEntries(es, all[2:]) {
		t.Fatalf("from 25: %+v", es)
	}
	if es, _ := s.lookup(t, st.ID, 0, 20, 2); !sameEntries(es, all[2:4]) {
		t.Fatalf("from 20 max 2: %+v", es)
	}
	// At the high watermark: nothing, no error. Past it: out of range.
	if es, _ := s.lookup(t, st.ID, 0, 50, 100); len(es) != 0 {
		t.Fatalf("at the high watermark: %+v", es)
	}
	_, _, err := s.c.Lookup(s.ctx, st.ID, 0, 51, 100)
	wantErr(t, "Lookup past the high watermark", err, meta.ErrOffsetOutOfRange)
	_, _, err = s.c.Lookup(s.ctx, st.ID, 0, -1, 100)
	wantErr(t, "Lookup below 0", err, meta.ErrOffsetOutOfRange)
	// max <= 0: the state whatever from is.
	for _, from := range []int64{-5, 0, 50, 1000} {
		es, ps, err := s.c.Lookup(s.ctx, st.ID, 0, from, 0)
		if err != nil || len(es) != 0 || ps.HighWatermark != 50 || ps.Bytes != 500 {
			t.Fatalf("Lookup(from %d, max 0) = %v %+v %v", from, es, ps, err)
		}
	}
	// Below the log start after a trim.
	if _, err := s.c.TrimPartition(s.ctx, st.ID, 0, 30); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.c.Lookup(s.ctx, st.ID, 0, 29, 100)
	wantErr(t, "Lookup below the log start", err, meta.ErrOffsetOutOfRange)
	if es, ps := s.lookup(t, st.ID, 0, 30, 100); !sameEntries(es, all[3:]) || ps.LogStart != 30 {
		t.Fatalf("from the log start: %+v %+v", es, ps)
	}
	// Unknown streams and partitions.
	_, _, err = s.c.Lookup(s.ctx, st.ID, 2, 0, 10)
	wantErr(t, "Lookup of a partition the stream lacks", err, meta.ErrPartitionNotFound)
	_, _, err = s.c.Lookup(s.ctx, st.ID, -1, 0, 10)
	wantErr(t, "Lookup of partition -1", err, meta.ErrPartitionNotFound)
	_, _, err = s.c.Lookup(s.ctx, st.ID+1_000_000, 0, 0, 0)
	wantErr(t, "Lookup of an unknown stream", err, meta.ErrStreamNotFound)
}

func testLeases(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	before := time.Now().UnixMilli()
	a, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-a", time.Minute)
	if err != nil || a.Epoch == 0 || a.Holder != "holder-a" || a.Kind != meta.LeaseSegment || a.StreamID != st.ID || a.Partition != 0 ||
		a.ExpiresMs < before+time.Minute.Milliseconds() {
		t.Fatalf("AcquireLease = %+v, %v", a, err)
	}
	_, err = s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-b", time.Minute)
	wantErr(t, "AcquireLease while another holds it", err, meta.ErrLeaseHeld)
	r, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-a", 2*time.Minute)
	if err != nil || r.Epoch != a.Epoch || r.ExpiresMs < a.ExpiresMs {
		t.Fatalf("renewal = %+v, %v; want epoch %d, later expiry", r, err, a.Epoch)
	}
	// Another kind is another lease.
	if c, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseCompact, "holder-b", time.Minute); err != nil || c.Kind != meta.LeaseCompact {
		t.Fatalf("compact lease beside the segment lease: %+v, %v", c, err)
	}
	// Release ends the grant; the next holder takes a later epoch.
	if err := s.c.ReleaseLease(s.ctx, r); err != nil {
		t.Fatal(err)
	}
	b, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-b", time.Minute)
	if err != nil || b.Epoch <= a.Epoch {
		t.Fatalf("after release: %+v, %v; want epoch above %d", b, err, a.Epoch)
	}
	// Releasing a stale grant does nothing.
	if err := s.c.ReleaseLease(s.ctx, a); err != nil {
		t.Fatal(err)
	}
	_, err = s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-a", time.Minute)
	wantErr(t, "AcquireLease after a stale release", err, meta.ErrLeaseHeld)
	// The same holder after its release is a new grant.
	if err := s.c.ReleaseLease(s.ctx, b); err != nil {
		t.Fatal(err)
	}
	b2, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-b", time.Minute)
	if err != nil || b2.Epoch <= b.Epoch {
		t.Fatalf("same holder after release: %+v, %v; want epoch above %d", b2, err, b.Epoch)
	}
	// Bad requests.
	for _, tc := range []struct {
		what, kind, holder string
		ttl                time.Duration
	}{
		{"ttl 0", meta.LeaseSegment, "h", 0},
		{"negative ttl", meta.LeaseSegment, "h", -time.Second},
		{"ttl above MaxLeaseTTL", meta.LeaseSegment, "h", meta.MaxLeaseTTL + time.Second},
		{"empty holder", meta.LeaseSegment, "", time.Minute},
		{"holder with a space", meta.LeaseSegment, "a b", time.Minute},
		{"empty kind", "", "h", time.Minute},
	} {
		_, err := s.c.AcquireLease(s.ctx, st.ID, 0, tc.kind, tc.holder, tc.ttl)
		wantErr(t, "AcquireLease with "+tc.what, err, meta.ErrInvalidArgument)
	}
	_, err = s.c.AcquireLease(s.ctx, st.ID, 1, meta.LeaseSegment, "h", time.Minute)
	wantErr(t, "AcquireLease of a partition the stream lacks", err, meta.ErrPartitionNotFound)
	_, err = s.c.AcquireLease(s.ctx, st.ID+1_000_000, 0, meta.LeaseSegment, "h", time.Minute)
	wantErr(t, "AcquireLease of an unknown stream", err, meta.ErrStreamNotFound)
}

// leaseTTL is the lease the expiry cases wait out.
const leaseTTL = 300 * time.Millisecond

func testLeaseExpiry(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	a, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-a", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseTTL + 200*time.Millisecond)
	b, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-b", time.Minute)
	if err != nil || b.Epoch <= a.Epoch {
		t.Fatalf("after expiry: %+v, %v; want a grant above epoch %d", b, err, a.Epoch)
	}
	if err := s.c.ReleaseLease(s.ctx, b); err != nil {
		t.Fatal(err)
	}
	// The same holder after its lease expired gets a new epoch too.
	c, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-c", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseTTL + 200*time.Millisecond)
	c2, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-c", time.Minute)
	if err != nil || c2.Epoch <= c.Epoch {
		t.Fatalf("same holder after expiry: %+v, %v; want epoch above %d", c2, err, c.Epoch)
	}
	// A swap under an expired lease is refused.
	s.commit(t, st.ID, s.key("x"), [3]int64{0, 4, 40})
	es, _ := s.lookup(t, st.ID, 0, 0, 10)
	if err := s.c.ReleaseLease(s.ctx, c2); err != nil {
		t.Fatal(err)
	}
	d, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "holder-d", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseTTL + 200*time.Millisecond)
	err = s.c.SwapIndex(s.ctx, meta.IndexSwap{Lease: d, Old: es, New: []meta.IndexEntry{segment(s.prefix+"s.seg", es...)}, StampMs: time.Now().UnixMilli()})
	wantErr(t, "SwapIndex under an expired lease", err, meta.ErrLeaseLost)
}

func testSwapIndex(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	for _, k := range []string{"a", "b", "c"} {
		s.commit(t, st.ID, s.key(k), [3]int64{0, 10, 100})
	}
	es, _ := s.lookup(t, st.ID, 0, 0, 10)
	l, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "seg", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	seg := segment(s.prefix+"s1.seg", es[0], es[1])
	swap := meta.IndexSwap{Lease: l, Old: es[:2], New: []meta.IndexEntry{seg}, StampMs: time.Now().UnixMilli()}
	if err := s.c.SwapIndex(s.ctx, swap); err != nil {
		t.Fatalf("SwapIndex: %v", err)
	}
	after, ps := s.lookup(t, st.ID, 0, 0, 10)
	if !sameEntries(after, []meta.IndexEntry{seg, es[2]}) || ps.HighWatermark != 30 || ps.Bytes != seg.Length+es[2].Length {
		t.Fatalf("after the swap: %+v %+v", after, ps)
	}
	// References moved: the WAL objects are retired, the segment is referenced.
	if r := s.referenced(t, s.key("a"), s.key("b"), s.key("c"), seg.Object); !slices.Equal(r, []bool{false, false, true, true}) {
		t.Fatalf("Referenced after the swap = %v", r)
	}
	ret := s.retired(t)
	if !slices.Equal(retiredKeys(ret), []string{s.key("a"), s.key("b")}) {
		t.Fatalf("retired after the swap: %v", ret)
	}
	for _, r := range ret {
		if r.RetiredMs < swap.StampMs-time.Minute.Milliseconds() || r.RetiredMs > time.Now().Add(time.Minute).UnixMilli() {
			t.Fatalf("retired at %d, swap stamped %d", r.RetiredMs, swap.StampMs)
		}
	}
	// A retry of the applied swap is answered nil, even under a lease since released.
	if err := s.c.SwapIndex(s.ctx, swap); err != nil {
		t.Fatalf("retried SwapIndex: %v", err)
	}
	if err := s.c.ReleaseLease(s.ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.c.SwapIndex(s.ctx, swap); err != nil {
		t.Fatalf("retried SwapIndex after release: %v", err)
	}
	// Old is compared as the index keeps it: MaxTimestamp is not part of it.
	l2, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "seg", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old := slices.Clone(after)
	old[0].MaxTimestamp, old[1].MaxTimestamp = 1, 2
	seg2 := segment(s.prefix+"s2.seg", after...)
	if err := s.c.SwapIndex(s.ctx, meta.IndexSwap{Lease: l2, Old: old, New: []meta.IndexEntry{seg2}, StampMs: time.Now().UnixMilli()}); err != nil {
		t.Fatalf("SwapIndex of a segment and a WAL entry, other max timestamps: %v", err)
	}
	if es, _ := s.lookup(t, st.ID, 0, 0, 10); !sameEntries(es, []meta.IndexEntry{seg2}) {
		t.Fatalf("after the second swap: %+v", es)
	}
	if r := s.referenced(t, seg.Object, s.key("c"), seg2.Object); !slices.Equal(r, []bool{false, false, true}) {
		t.Fatalf("Referenced after the second swap = %v", r)
	}
	if got := retiredKeys(s.retired(t)); !slices.Equal(got, []string{s.key("a"), s.key("b"), s.key("c"), seg.Object}) {
		t.Fatalf("retired after the second swap: %v", got)
	}
}

func testSwapIndexErrors(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	for _, k := range []string{"a", "b"} {
		s.commit(t, st.ID, s.key(k), [3]int64{0, 10, 100})
	}
	es, _ := s.lookup(t, st.ID, 0, 0, 10)
	l, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "seg", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	seg := segment(s.prefix+"s.seg", es...)
	swap := func(l meta.Lease, old, new []meta.IndexEntry) error {
		return s.c.SwapIndex(s.ctx, meta.IndexSwap{Lease: l, Old: old, New: new, StampMs: now})
	}
	// Shapes the sequencer refuses whatever the state.
	walNew := seg
	walNew.Kind = meta.KindWAL
	short := seg
	short.Count--
	gap := []meta.IndexEntry{segment(s.prefix+"s.seg", es[0]), segment(s.prefix+"t.seg", es[1])}
	gap[1].BaseOffset++
	gap[1].Count--
	noEpoch := l
	noEpoch.Epoch = 0
	for _, tc := range []struct {
		what     string
		l        meta.Lease
		old, new []meta.IndexEntry
	}{
		{"no old entries", l, nil, []meta.IndexEntry{seg}},
		{"no new entries", l, es, nil},
		{"new entries of kind WAL", l, es, []meta.IndexEntry{walNew}},
		{"new entries not covering old", l, es, []meta.IndexEntry{short}},
		{"new entries with a gap", l, es, gap},
		{"old entries with a gap", l, []meta.IndexEntry{es[1], es[0]}, []meta.IndexEntry{seg}},
		{"a lease without an epoch", noEpoch, es, []meta.IndexEntry{seg}},
	} {
		wantErr(t, "SwapIndex with "+tc.what, swap(tc.l, tc.old, tc.new), meta.ErrInvalidArgument)
	}
	// Old not in the index as it stands.
	moved := slices.Clone(es)
	moved[1].Offset++
	wantErr(t, "SwapIndex of entries the index does not hold", swap(l, moved, []meta.IndexEntry{seg}), meta.ErrIndexChanged)
	other := slices.Clone(es)
	other[0].Object = s.key("z")
	wantErr(t, "SwapIndex naming another object", swap(l, other, []meta.IndexEntry{seg}), meta.ErrIndexChanged)
	// A lease that is not the current grant.
	if err := s.c.ReleaseLease(s.ctx, l); err != nil {
		t.Fatal(err)
	}
	l2, err := s.c.AcquireLease(s.ctx, st.ID, 0, meta.LeaseSegment, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SwapIndex under a released lease", swap(l, es, []meta.IndexEntry{seg}), meta.ErrLeaseLost)
	wrongKind := l2
	wrongKind.Kind = meta.LeaseCompact
	wantErr(t, "SwapIndex under a lease of another kind", swap(wrongKind, es, []meta.IndexEntry{seg}), meta.ErrLeaseLost)
	// Nothing changed.
	if got, _ := s.lookup(t, st.ID, 0, 0, 10); !sameEntries(got, es) {
		t.Fatalf("refused swaps changed the index: %+v", got)
	}
	if r := s.referenced(t, s.key("a"), s.key("b"), seg.Object); !slices.Equal(r, []bool{true, true, false}) {
		t.Fatalf("Referenced after refused swaps = %v", r)
	}
	// After a trim that drops Old's first entry: the index changed.
	if _, err := s.c.TrimPartition(s.ctx, st.ID, 0, 10); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SwapIndex after a trim", swap(l2, es, []meta.IndexEntry{seg}), meta.ErrIndexChanged)
	// An unknown stream.
	gone := l2
	gone.StreamID += 1_000_000
	wantErr(t, "SwapIndex of an unknown stream", swap(gone, es, []meta.IndexEntry{seg}), meta.ErrStreamNotFound)
}

func testTrimPartition(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	s.commit(t, st.ID, s.key("x"), [3]int64{0, 10, 100})
	s.commit(t, st.ID, s.key("y"), [3]int64{0, 5, 50})
	s.commit(t, st.ID, s.key("z"), [3]int64{0, 7, 70})
	all, _ := s.lookup(t, st.ID, 0, 0, 10)
	// Into y: x's entry goes (wholly below), y's stays.
	ps, err := s.c.TrimPartition(s.ctx, st.ID, 0, 12)
	if err != nil || ps.LogStart != 12 || ps.HighWatermark != 22 || ps.Bytes != 120 || ps.StreamID != st.ID {
		t.Fatalf("TrimPartition(12) = %+v, %v", ps, err)
	}
	if es, _ := s.lookup(t, st.ID, 0, 12, 10); !sameEntries(es, all[1:]) {
		t.Fatalf("after the trim: %+v", es)
	}
	if r := s.referenced(t, s.key("x"), s.key("y")); !slices.Equal(r, []bool{false, true}) {
		t.Fatalf("Referenced after the trim = %v", r)
	}
	if got := retiredKeys(s.retired(t)); !slices.Equal(got, []string{s.key("x")}) {
		t.Fatalf("retired after the trim: %v", got)
	}
	// A lower or equal log start changes nothing.
	for _, to := range []int64{5, 12} {
		if ps, err := s.c.TrimPartition(s.ctx, st.ID, 0, to); err != nil || ps.LogStart != 12 || ps.Bytes != 120 {
			t.Fatalf("TrimPartition(%d) = %+v, %v", to, ps, err)
		}
	}
	// Past the high watermark: refused.
	_, err = s.c.TrimPartition(s.ctx, st.ID, 0, 23)
	wantErr(t, "TrimPartition past the high watermark", err, meta.ErrOffsetOutOfRange)
	// To the high watermark: every entry goes.
	if ps, err := s.c.TrimPartition(s.ctx, st.ID, 0, 22); err != nil || ps.LogStart != 22 || ps.Bytes != 0 {
		t.Fatalf("TrimPartition(22) = %+v, %v", ps, err)
	}
	if es, _ := s.lookup(t, st.ID, 0, 22, 10); len(es) != 0 {
		t.Fatalf("after trimming everything: %+v", es)
	}
	if got := retiredKeys(s.retired(t)); !slices.Equal(got, []string{s.key("x"), s.key("y"), s.key("z")}) {
		t.Fatalf("retired after trimming everything: %v", got)
	}
	// Commits continue at the high watermark.
	if res := s.commit(t, st.ID, s.key("w"), [3]int64{0, 1, 10}); res.BaseOffsets[0] != 22 {
		t.Fatalf("commit after trim at %d, want 22", res.BaseOffsets[0])
	}
	_, err = s.c.TrimPartition(s.ctx, st.ID+1_000_000, 0, 1)
	wantErr(t, "TrimPartition of an unknown stream", err, meta.ErrStreamNotFound)
	_, err = s.c.TrimPartition(s.ctx, st.ID, 1, 1)
	wantErr(t, "TrimPartition of a partition the stream lacks", err, meta.ErrPartitionNotFound)
}

func testRetired(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	keys := []string{s.key("a"), s.key("b"), s.key("c"), s.key("d"), s.key("e")}
	for _, k := range keys {
		s.commit(t, st.ID, k, [3]int64{0, 1, 10})
	}
	if len(s.retired(t)) != 0 {
		t.Fatal("referenced objects are in the retired set")
	}
	if _, err := s.c.TrimPartition(s.ctx, st.ID, 0, 5); err != nil {
		t.Fatal(err)
	}
	// Paging: after and limit, in key order.
	ret := s.retired(t) // pages of 2
	if !slices.Equal(retiredKeys(ret), keys) {
		t.Fatalf("retired = %v, want %v", retiredKeys(ret), keys)
	}
	page, err := s.c.ListRetired(s.ctx, s.key("b"), 2)
	if err != nil || !slices.Equal(retiredKeys(page), keys[2:4]) {
		t.Fatalf("ListRetired after b, 2 = %v, %v", page, err)
	}
	// Forget removes; unknown keys are ignored.
	if err := s.c.ForgetRetired(s.ctx, []string{keys[1], keys[3], s.key("never")}); err != nil {
		t.Fatal(err)
	}
	if got := retiredKeys(s.retired(t)); !slices.Equal(got, []string{keys[0], keys[2], keys[4]}) {
		t.Fatalf("after ForgetRetired: %v", got)
	}
	if r := s.referenced(t, keys...); slices.Contains(r, true) {
		t.Fatalf("Referenced after ForgetRetired = %v", r)
	}
	if r := s.referenced(t); len(r) != 0 {
		t.Fatalf("Referenced() = %v", r)
	}
}

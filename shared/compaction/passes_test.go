package compaction

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

// smallMap holds a few dozen short keys: far below the key counts of these tests.
const smallMap = MinKeyMapBytes

// modelLast is model, keeping the partition's last record whatever it is (compaction
// never drops it).
func modelLast(all []rec, horizon int64) []rec {
	out := model(all, horizon)
	if len(all) > 0 && (len(out) == 0 || out[len(out)-1].Offset != all[len(all)-1].Offset) {
		out = append(out, all[len(all)-1])
	}
	return out
}

// genSegments appends segments of random records over keys k0..k<keys-1> to f and b.
func genSegments(t *testing.T, rng *rand.Rand, b objstore.Bucket, f *metafake.Meta, now time.Time, segments, keys int) {
	t.Helper()
	for range segments {
		var batches [][]rec
		for range 1 + rng.IntN(4) {
			var recs []rec
			for range 1 + rng.IntN(12) {
				r := rec{Key: sp(fmt.Sprint("k", rng.IntN(keys))), Value: sp(fmt.Sprint("v", rng.IntN(1000))),
					Ts: now.Add(-time.Duration(rng.IntN(72)) * time.Hour).UnixMilli()}
				switch rng.IntN(12) {
				case 0:
					r.Value = nil
				case 1:
					r.Key = nil
				}
				recs = append(recs, r)
			}
			batches = append(batches, recs)
		}
		addSegment(t, b, f, batches, recordbatch.Compression(rng.IntN(2)*4))
	}
}

func newPartition() (*objstore.Mem, *metafake.Meta) {
	f := metafake.New()
	f.AddStream(1, 1)
	return objstore.NewMem(), f
}

// TestCompactMultiPass: a key map far smaller than the key count takes many passes and
// keeps exactly what one unbounded pass keeps, at the same offsets.
func TestCompactMultiPass(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1000 * 3600_000)
	horizon := now.Add(-24 * time.Hour).UnixMilli()
	bOne, fOne := newPartition()
	bMany, fMany := newPartition()
	genSegments(t, rand.New(rand.NewPCG(7, 8)), bOne, fOne, now, 60, 400)
	genSegments(t, rand.New(rand.NewPCG(7, 8)), bMany, fMany, now, 60, 400)
	all := read(t, bOne, fOne.Entries(1, 0))
	var maxOld int64
	for _, e := range fOne.Entries(1, 0) {
		maxOld = max(maxOld, e.Length)
	}

	one, err := newBounded(t, bOne, fOne, &now, 2000, 64<<20, nil).Partition(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	many, err := newBounded(t, bMany, fMany, &now, 2000, smallMap, nil).Partition(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	gotOne, gotMany := read(t, bOne, fOne.Entries(1, 0)), read(t, bMany, fMany.Entries(1, 0))
	want := modelLast(all, horizon)
	if !recsEqual(gotOne, want) {
		t.Fatalf("unbounded: %d records, want %d", len(gotOne), len(want))
	}
	if !recsEqual(gotMany, gotOne) {
		t.Fatalf("bounded: %d records, unbounded %d, model %d", len(gotMany), len(gotOne), len(want))
	}
	if passes(one) != 1 || passes(many) < 3 {
		t.Fatalf("passes: unbounded %d, bounded %d (want 1 and >= 3)", passes(one), passes(many))
	}
	if one.Dropped != many.Dropped || one.Dropped != len(all)-len(want) {
		t.Fatalf("dropped: unbounded %d, bounded %d, want %d", one.Dropped, many.Dropped, len(all)-len(want))
	}
	// New segments are cut at the target size: none is larger than the target or the
	// largest old entry.
	for _, e := range fMany.Entries(1, 0) {
		if e.Length > max(2000, maxOld) {
			t.Fatalf("segment of %d bytes, target 2000, old entries up to %d", e.Length, maxOld)
		}
	}
	if n := len(fMany.Entries(1, 0)); n > len(fOne.Entries(1, 0))*3 {
		t.Fatalf("bounded: %d segments, unbounded %d", n, len(fOne.Entries(1, 0)))
	}
	t.Logf("%d records, %d kept; bounded map: %d passes, %d segments; unbounded %d segments", len(all), len(want), passes(many),
		len(fMany.Entries(1, 0)), len(fOne.Entries(1, 0)))
}

// TestCompactLateOverwrite: data written after a first compaction is compacted against
// the earlier data, and the next run starts at the cleaned point (kept in a coordination
// store, so a new Compactor knows it).
func TestCompactLateOverwrite(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1000 * 3600_000)
	horizon := now.Add(-24 * time.Hour).UnixMilli()
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b, f := newPartition()
	rng := rand.New(rand.NewPCG(3, 4))
	genSegments(t, rng, b, f, now, 40, 300)
	if _, err := newBounded(t, b, f, &now, 2000, smallMap, store).Partition(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	first := read(t, b, f.Entries(1, 0))
	// Late writes: new values of a few early keys, a delete of another, and a record to end
	// the run.
	late := [][]rec{{{Key: sp("k1"), Value: sp("late1"), Ts: now.UnixMilli()}, {Key: sp("k2"), Value: nil, Ts: now.UnixMilli()}},
		{{Key: sp("k3"), Value: sp("late3"), Ts: now.UnixMilli()}, {Key: sp("k1"), Value: sp("late1b"), Ts: now.UnixMilli()}}}
	addSegment(t, b, f, late, recordbatch.None)
	all := read(t, b, f.Entries(1, 0))
	res, err := newBounded(t, b, f, &now, 2000, smallMap, store).Partition(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, b, f.Entries(1, 0))
	if want := modelLast(all, horizon); !recsEqual(got, want) {
		t.Fatalf("after late writes: %d records, want %d", len(got), len(want))
	}
	for _, r := range got {
		if r.Key != nil && (*r.Key == "k1" || *r.Key == "k2" || *r.Key == "k3") && r.Ts != now.UnixMilli() {
			t.Fatalf("early copy of %s survives: %v", *r.Key, r)
		}
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if !slices.ContainsFunc(first, func(r rec) bool { return r.Key != nil && *r.Key == k }) {
			t.Fatalf("the data has no early %s: the test proves nothing", k)
		}
	}
	if passes(res) != 1 {
		t.Fatalf("the late run took %d passes; its dirty section (3 keys) fits one", passes(res))
	}
	// Clean now: another run, by yet another Compactor, reads nothing.
	cb := &countingBucket{Bucket: b}
	res, err = newBounded(t, cb, f, &now, 2000, smallMap, store).Partition(ctx, 1, 0)
	if err != nil || passes(res) != 0 || cb.gets != 0 {
		t.Fatalf("clean partition: %+v %v, %d GETs", res, err, cb.gets)
	}
}

type countingBucket struct {
	objstore.Bucket
	gets int
}

func (c *countingBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.gets++
	return c.Bucket.GetRange(ctx, key, off, n)
}

// TestCompactTombstoneRetentionMultiPass: tombstones are kept until their retention
// passes, across passes; once one expires a run drops it without new data.
func TestCompactTombstoneRetentionMultiPass(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1000 * 3600_000)
	b, f := newPartition()
	var batches [][]rec
	for i := range 200 {
		batches = append(batches, []rec{{Key: sp(fmt.Sprint("k", i)), Value: sp("v"), Ts: now.Add(-100 * time.Hour).UnixMilli()}})
	}
	addSegment(t, b, f, batches, recordbatch.None)
	batches = nil
	for i := range 200 {
		// Deletes of every key: the even ones long ago, the odd ones an hour ago.
		ts := now.Add(-48 * time.Hour)
		if i%2 == 1 {
			ts = now.Add(-time.Hour)
		}
		batches = append(batches, []rec{{Key: sp(fmt.Sprint("k", i)), Value: nil, Ts: ts.UnixMilli()}})
	}
	addSegment(t, b, f, batches, recordbatch.Zstd)
	addSegment(t, b, f, [][]rec{{{Key: sp("end"), Value: sp("x"), Ts: now.UnixMilli()}}}, recordbatch.None)
	all := read(t, b, f.Entries(1, 0))
	c := newBounded(t, b, f, &now, 1<<20, smallMap, nil)
	res, err := c.Partition(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, b, f.Entries(1, 0))
	if want := modelLast(all, now.Add(-24*time.Hour).UnixMilli()); !recsEqual(got, want) || len(got) != 101 || passes(res) < 3 {
		t.Fatalf("%d passes; got %d records %v\nwant %d", passes(res), len(got), got, len(want))
	}
	// Nothing new and nothing expired: nothing to do.
	now = now.Add(22 * time.Hour)
	if res, err := c.Partition(ctx, 1, 0); err != nil || passes(res) != 0 {
		t.Fatalf("before expiry: %+v %v", res, err)
	}
	// The odd tombstones pass retention: one run drops them, with no new data.
	now = now.Add(2 * time.Hour)
	if res, err = c.Partition(ctx, 1, 0); err != nil || res.Dropped != 100 {
		t.Fatalf("after expiry: %+v %v", res, err)
	}
	if got := read(t, b, f.Entries(1, 0)); len(got) != 1 || *got[0].Key != "end" {
		t.Fatalf("after expiry: %v", got)
	}
	if res, err := c.Partition(ctx, 1, 0); err != nil || passes(res) != 0 {
		t.Fatalf("after all expired: %+v %v", res, err)
	}
}

// TestCompactLostLeaseMidRun: the lease is lost in the second pass of a multi-pass run.
// The swaps applied stand, the refused segment is deleted, the index reads the same
// records minus dropped ones, and a later run finishes the job.
func TestCompactLostLeaseMidRun(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1000 * 3600_000)
	horizon := now.Add(-24 * time.Hour).UnixMilli()
	b, f := newPartition()
	genSegments(t, rand.New(rand.NewPCG(5, 6)), b, f, now, 50, 400)
	all := read(t, b, f.Entries(1, 0))
	want := modelLast(all, horizon)
	c := newBounded(t, b, f, &now, 2000, smallMap, nil)
	// Drop the lease at the second swap after the first pass recorded its point.
	var applied, refused []string
	swaps := 0
	f.BeforeSwap = func(s meta.IndexSwap) {
		swaps++
		if cleanedOffset(c) > 0 && len(refused) == 0 && swaps%2 == 0 {
			f.DropLeases() // expired and taken over
			refused = append(refused, s.New[0].Object)
			return
		}
		applied = append(applied, s.New[0].Object)
	}
	res, err := c.Partition(ctx, 1, 0)
	if err != nil || !res.Refused || len(refused) != 1 || passes(res) < 2 {
		t.Fatalf("%+v %v; %d refused", res, err, len(refused))
	}
	f.BeforeSwap = nil
	got := read(t, b, f.Entries(1, 0)) // contiguous entries, batches inside them
	if !isSubsequence(want, got) || !isSubsequence(got, all) {
		t.Fatalf("after the lost lease: %d records, not between the %d kept and the %d written", len(got), len(want), len(all))
	}
	if _, err := b.Stat(ctx, refused[0]); err == nil {
		t.Fatalf("refused segment %s left behind", refused[0])
	}
	for _, k := range applied {
		if _, err := b.Stat(ctx, k); err != nil {
			t.Fatalf("applied segment %s: %v", k, err)
		}
	}
	// Another holder finishes.
	res, err = newBounded(t, b, f, &now, 2000, smallMap, nil).Partition(ctx, 1, 0)
	if err != nil || res.Refused {
		t.Fatalf("%+v %v", res, err)
	}
	if got := read(t, b, f.Entries(1, 0)); !recsEqual(got, want) {
		t.Fatalf("after the second run: %d records, want %d", len(got), len(want))
	}
}

// isSubsequence reports whether a's records appear in b in order.
func isSubsequence(a, b []rec) bool {
	i := 0
	for _, r := range b {
		if i < len(a) && a[i].String() == r.String() {
			i++
		}
	}
	return i == len(a)
}

// TestCompactBoundedRounds: random partitions, key maps and targets, several rounds of
// appends and compactions (some with the clock moved past tombstone retention); after each
// round the partition holds exactly what compacting everything written so far keeps.
func TestCompactBoundedRounds(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 99))
		now := time.UnixMilli(1000 * 3600_000)
		b, f := newPartition()
		c := newBounded(t, b, f, &now, int64(300+rng.IntN(3000)), int64(MinKeyMapBytes+rng.IntN(3)*4096), nil)
		var written []rec // the model's view: everything kept so far plus what was added
		for round := range 4 {
			before := len(f.Entries(1, 0))
			genSegments(t, rng, b, f, now, 5+rng.IntN(20), 50+rng.IntN(300))
			es := f.Entries(1, 0)
			written = append(written, read(t, b, es[before:])...)
			if rng.IntN(2) == 0 {
				now = now.Add(time.Duration(rng.IntN(48)) * time.Hour)
			}
			res, err := c.Partition(ctx, 1, 0)
			if err != nil || res.Refused {
				t.Fatalf("seed %d round %d: %+v %v", seed, round, res, err)
			}
			written = modelLast(written, now.Add(-24*time.Hour).UnixMilli())
			if got := read(t, b, f.Entries(1, 0)); !recsEqual(got, written) {
				t.Fatalf("seed %d round %d (%d passes): %d records, want %d", seed, round, passes(res), len(got), len(written))
			}
		}
	}
}

// TestCompactKeyTooLarge: a key that cannot fit in the key map stops the run with an error
// that says so, and changes nothing.
func TestCompactKeyTooLarge(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1000 * 3600_000)
	b, f := newPartition()
	big := string(make([]byte, 2*MinKeyMapBytes))
	addSegment(t, b, f, [][]rec{{{Key: sp(big), Value: sp("1")}, {Key: sp(big), Value: sp("2")}}}, recordbatch.None)
	before := f.Entries(1, 0)
	_, err := newBounded(t, b, f, &now, 2000, smallMap, nil).Partition(ctx, 1, 0)
	if err == nil || !strings.Contains(err.Error(), "does not fit in KeyMapBytes 4096") || !strings.Contains(err.Error(), "8192 bytes") {
		t.Fatalf("%v", err)
	}
	if !slices.Equal(before, f.Entries(1, 0)) {
		t.Fatal("index changed")
	}
}

// TestCompactRenewsLease: a multi-pass run longer than the lease TTL keeps its lease by
// renewing it.
func TestCompactRenewsLease(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1000 * 3600_000)
	b, f := newPartition()
	f.Now = func() time.Time { return now }
	genSegments(t, rand.New(rand.NewPCG(9, 9)), b, f, now, 40, 300)
	all := read(t, b, f.Entries(1, 0))
	c, err := New(Config{Bucket: b, Meta: f, TargetBytes: 2000, KeyMapBytes: smallMap, LeaseTTL: 3 * time.Second,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	swaps := 0
	f.BeforeSwap = func(meta.IndexSwap) { swaps++; now = now.Add(2 * time.Second) }
	res, err := c.Partition(ctx, 1, 0)
	if err != nil || res.Refused || passes(res) < 3 || swaps < 3 {
		t.Fatalf("%+v %v after %d swaps", res, err, swaps)
	}
	if got, want := read(t, b, f.Entries(1, 0)), modelLast(all, now.Add(-24*time.Hour).UnixMilli()); !recsEqual(got, want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
}

package retention

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// entries builds consecutive entries of count offsets each with the given lengths and max
// timestamps.
func entries(base int64, lens []int64, ts []int64) []meta.IndexEntry {
	var out []meta.IndexEntry
	for i := range lens {
		out = append(out, meta.IndexEntry{BaseOffset: base, Count: 10, Kind: meta.KindSegment, Length: lens[i], MaxTimestamp: ts[i]})
		base += 10
	}
	return out
}

func TestPlan(t *testing.T) {
	now := time.UnixMilli(100_000)
	es := entries(50, []int64{100, 200, 300, 400}, []int64{10_000, 20_000, 30_000, 99_000})
	tests := []struct {
		name         string
		ms, bytes    int64
		want         int64
		n            int
		bt, bs       bool
		droppedBytes int64
	}{
		{"nothing set", -1, -1, 50, 0, false, false, 0},
		{"time: none old enough", 95_000, -1, 50, 0, false, false, 0},
		{"time: one", 85_000, -1, 60, 1, true, false, 100},
		{"time: boundary is strict", 90_000, -1, 50, 0, false, false, 0},
		{"time: three", 60_000, -1, 80, 3, true, false, 600},
		{"time: all, the newest too", 0, -1, 90, 4, true, false, 1000},
		{"size: keeps at least retention", -1, 700, 70, 2, false, true, 300},
		{"size: exact", -1, 400, 80, 3, false, true, 600},
		{"size: never the newest", -1, 0, 80, 3, false, true, 600},
		{"size: under", -1, 1000, 50, 0, false, false, 0},
		{"both: the larger", 85_000, 400, 80, 3, true, true, 600},
		{"both: time wins", 0, 400, 90, 4, true, true, 1000},
	}
	for _, tc := range tests {
		p := Plan(es, 50, tc.ms, tc.bytes, now)
		if p.LogStart != tc.want || p.Entries != tc.n || p.ByTime != tc.bt || p.BySize != tc.bs || p.Bytes != tc.droppedBytes {
			t.Errorf("%s: %+v, want log start %d, %d entries, %d bytes, time %v size %v", tc.name, p, tc.want, tc.n, tc.droppedBytes, tc.bt, tc.bs)
		}
	}
	if p := Plan(nil, 7, 0, 0, now); p.LogStart != 7 || p.Entries != 0 {
		t.Fatalf("empty: %+v", p)
	}
}

type fakeMeta struct {
	streams []meta.Stream
	parts   map[[2]int64][]meta.IndexEntry
	start   map[[2]int64]int64
	trims   []int64
}

func (f *fakeMeta) ListNamespaces(context.Context) ([]string, error) { return []string{"default"}, nil }
func (f *fakeMeta) ListStreams(context.Context, string) ([]meta.Stream, error) {
	return f.streams, nil
}
func (f *fakeMeta) Lookup(ctx context.Context, s uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	k := [2]int64{int64(s), int64(p)}
	es, ok := f.parts[k]
	if !ok {
		return nil, meta.PartitionState{}, meta.ErrStreamNotFound
	}
	st := meta.PartitionState{StreamID: s, Partition: p, LogStart: f.start[k]}
	if len(es) > 0 {
		st.HighWatermark = es[len(es)-1].End()
	}
	if max <= 0 {
		return nil, st, nil
	}
	var out []meta.IndexEntry
	for _, e := range es {
		if e.End() > from && len(out) < max {
			out = append(out, e)
		}
	}
	return out, st, nil
}
func (f *fakeMeta) TrimPartition(ctx context.Context, s uint64, p int32, logStart int64) (meta.PartitionState, error) {
	k := [2]int64{int64(s), int64(p)}
	var keep []meta.IndexEntry
	for _, e := range f.parts[k] {
		if e.End() > logStart {
			keep = append(keep, e)
		}
	}
	f.parts[k] = keep
	f.start[k] = logStart
	f.trims = append(f.trims, logStart)
	return meta.PartitionState{StreamID: s, Partition: p, LogStart: logStart}, nil
}

func TestSweep(t *testing.T) {
	now := time.UnixMilli(100_000)
	mk := func(id uint64, ms, bytes int64, policy string) meta.Stream {
		return meta.Stream{ID: id, StreamConfig: meta.StreamConfig{Namespace: "default", Name: "s", Partitions: 1, RetentionMs: ms, RetentionBytes: bytes, CleanupPolicy: policy}}
	}
	es := entries(0, []int64{100, 100, 100}, []int64{1_000, 2_000, 99_000})
	f := &fakeMeta{
		streams: []meta.Stream{mk(1, 50_000, -1, "delete"), mk(2, -1, 150, "delete"), mk(3, 0, 0, "compact"), mk(4, -1, -1, "delete"), mk(5, 1, -1, "delete")},
		parts:   map[[2]int64][]meta.IndexEntry{{1, 0}: es, {2, 0}: es, {3, 0}: es, {4, 0}: es},
		start:   map[[2]int64]int64{},
	}
	r, err := New(Config{Meta: f, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	trims, err := r.Sweep(context.Background())
	if err != nil { // stream 5 has no partitions in the fake: deleted meanwhile, not an error
		t.Fatal(err)
	}
	if len(trims) != 2 || trims[0].StreamID != 1 || trims[0].To != 20 || !trims[0].ByTime || trims[1].StreamID != 2 || trims[1].To != 10 || !trims[1].BySize {
		t.Fatalf("%+v", trims)
	}
	// Idempotent: a second sweep changes nothing.
	trims, err = r.Sweep(context.Background())
	if err != nil || len(trims) != 0 || len(f.trims) != 2 {
		t.Fatalf("%+v %v %v", trims, err, f.trims)
	}
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
}

package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/compaction"
	"github.com/loamhq/loam/shared/gc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/retention"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/streamapi"
)

// produceAt sends one produce call of n records with timestamp ts (one WAL entry each
// call: the calls are sequential and the node flushes every 2 ms).
func (c *cluster) produceAt(stream, tag string, n int, ts int64) {
	c.t.Helper()
	recs := make([]streamapi.Record, n)
	for i := range recs {
		k := fmt.Sprintf("%s-%d", tag, i)
		recs[i] = streamapi.Record{Key: &k, Value: json.RawMessage(fmt.Sprintf(`{"v":%q,"pad":%q}`, k, pad(100))), Timestamp: ptr(ts)}
	}
	if _, err := c.api.Produce(context.Background(), meta.DefaultNS, stream, recs); err != nil {
		c.t.Fatal(err)
	}
}

// TestRetention: time retention, size retention (never the newest entry) and the
// offset-out-of-range answer naming the log start, verified record by record through the
// HTTP API; gc then deletes the trimmed objects after grace.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, objstore.NewMem(), 2*time.Millisecond)
	now := time.Now()
	old := now.Add(-2 * time.Hour).UnixMilli()
	stT := c.createStream(streamapi.CreateStreamRequest{Name: "bytime", RetentionMs: ptr(int64(time.Hour / time.Millisecond))})
	stS := c.createStream(streamapi.CreateStreamRequest{Name: "bysize", RetentionMs: ptr(int64(-1))})
	for i := range 3 {
		c.produceAt("bytime", fmt.Sprint("old", i), 10, old)
	}
	for i := range 3 {
		c.produceAt("bytime", fmt.Sprint("new", i), 10, now.UnixMilli())
	}
	for i := range 10 {
		c.produceAt("bysize", fmt.Sprint("s", i), 10, now.UnixMilli())
	}
	beforeT := fetchAll(t, c.api, "bytime", 0, 0)
	beforeS := fetchAll(t, c.api, "bysize", 0, 0)
	esT, _ := c.entries(stT, 0)
	esS, _ := c.entries(stS, 0)
	if len(esT) != 6 || len(esS) != 10 {
		t.Fatalf("want one entry per produce call: %d, %d", len(esT), len(esS))
	}
	// bysize keeps at least its last three entries' bytes.
	var keep int64
	for _, e := range esS[7:] {
		keep += e.Length
	}
	if _, err := c.api.PatchStream(ctx, meta.DefaultNS, "bysize", streamapi.PatchStreamRequest{RetentionBytes: ptr(keep)}); err != nil {
		t.Fatal(err)
	}
	r, err := retention.New(retention.Config{Meta: c.meta, Now: func() time.Time { return now }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Handler().Invoke(ctx, json.RawMessage(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)); err != nil {
		t.Fatal(err)
	}
	checkTrimmed := func(name string, before []streamapi.Record, logStart int64) {
		t.Helper()
		for _, api := range []*streamapi.Client{c.api, mustNode(c)} {
			resp, err := api.Fetch(ctx, meta.DefaultNS, name, 0, 0, 1<<20, 0)
			if streamapi.ErrorCode(err) != streamapi.CodeOffsetOutOfRange || !strings.Contains(err.Error(), fmt.Sprint(logStart)) {
				t.Fatalf("%s: fetch below the log start: %+v %v", name, resp, err)
			}
			sameRecords(t, name, fetchAll(t, api, name, 0, logStart), before[logStart:])
		}
	}
	checkTrimmed("bytime", beforeT, 30)
	checkTrimmed("bysize", beforeS, 70)
	_, psT := c.entries(stT, 0)
	if psT.LogStart != 30 || psT.HighWatermark != 60 {
		t.Fatalf("%+v", psT)
	}
	// Idempotent.
	if trims, err := r.Sweep(ctx); err != nil || len(trims) != 0 {
		t.Fatalf("%+v %v", trims, err)
	}

	// Size retention never trims the newest entry, of WAL or segment kind: segment bysize
	// into segments, then ask for 1 byte. (0 would do the same, but a patch to 0 does not
	// reach the stream today.)
	seg, _ := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 1 << 10, MaxAge: time.Millisecond, Logger: quiet()})
	if _, err := seg.Partition(ctx, stS.ID, 0); err != nil {
		t.Fatal(err)
	}
	es, _ := c.entries(stS, 0)
	if wal, segs := kinds(es); wal != 0 || segs < 2 {
		t.Fatalf("%d WAL entries, %d segments", wal, segs)
	}
	if _, err := c.api.PatchStream(ctx, meta.DefaultNS, "bysize", streamapi.PatchStreamRequest{RetentionBytes: ptr(int64(1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	last := es[len(es)-1]
	checkTrimmed("bysize", beforeS, last.BaseOffset)

	// GC: every object no longer referenced goes after grace; what is referenced stays.
	gnow := time.Now().Add(time.Hour)
	g, _ := gc.New(gc.Config{Bucket: c.bucket, Meta: c.meta, Coord: c.coord, Grace: time.Minute, Now: func() time.Time { return gnow }, Logger: quiet()})
	gst, err := g.Run(ctx)
	if err != nil || gst.Deleted == 0 {
		t.Fatalf("%+v %v", gst, err)
	}
	all := append(listKeys(t, c.bucket, "wal/"), listKeys(t, c.bucket, "seg/")...)
	refd, err := c.meta.Referenced(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range all {
		if !refd[i] {
			t.Errorf("%s is left but unreferenced", k)
		}
	}
	if len(all) != 3+1 { // bytime's three new WAL objects and bysize's last segment
		t.Fatalf("objects left: %v", all)
	}
	checkTrimmed("bytime", beforeT, 30)
	checkTrimmed("bysize", beforeS, last.BaseOffset)
}

func mustNode(c *cluster) *streamapi.Client {
	_, api := c.startNode(fmt.Sprint("n", time.Now().UnixNano()), time.Millisecond)
	return api
}

// TestCompaction: a compacted stream keeps the latest value per key in offset order;
// tombstones go once older than the tombstone retention; null keys stay; offsets never
// change.
func TestCompaction(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, objstore.NewMem(), 2*time.Millisecond)
	st := c.createStream(streamapi.CreateStreamRequest{Name: "kv", CleanupPolicy: meta.CleanupCompact})
	now := time.Now()
	old := now.Add(-48 * time.Hour).UnixMilli()
	put := func(key *string, value string, ts int64) {
		r := streamapi.Record{Key: key, Timestamp: ptr(ts)}
		if value != "" {
			r.Value = json.RawMessage(value)
		}
		if _, err := c.api.Produce(ctx, meta.DefaultNS, "kv", []streamapi.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for k := range 10 {
			put(ptr(fmt.Sprint("k", k)), fmt.Sprintf(`{"k":%d,"round":%d}`, k, round), old+int64(round))
		}
	}
	put(nil, `"no key"`, old)
	put(ptr("k5"), "", old)             // tombstone past retention
	put(ptr("k6"), "", now.UnixMilli()) // tombstone within retention
	put(ptr("k7"), `"back"`, now.UnixMilli())
	all := fetchAll(t, c.api, "kv", 0, 0)
	if len(all) != 34 {
		t.Fatalf("%d records", len(all))
	}
	seg, _ := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 2 << 10, MaxAge: time.Millisecond, Logger: quiet()})
	if _, err := seg.Partition(ctx, st.ID, 0); err != nil {
		t.Fatal(err)
	}
	comp, err := compaction.New(compaction.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 1 << 10, TombstoneRetention: 24 * time.Hour,
		Now: func() time.Time { return now }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comp.Handler().Invoke(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}

	// The model: latest per key, expired tombstones gone, null keys kept.
	latest := map[string]int64{}
	for _, r := range all {
		if r.Key != nil {
			latest[*r.Key] = *r.Offset
		}
	}
	var want []streamapi.Record
	for _, r := range all {
		if r.Key == nil || (latest[*r.Key] == *r.Offset && !(r.IsTombstone() && *r.Timestamp < now.Add(-24*time.Hour).UnixMilli())) {
			want = append(want, r)
		}
	}
	if len(want) != 10 { // k0..k9 but k5 (k6 a tombstone, k7 "back"), the null key
		t.Fatalf("model has %d records", len(want))
	}
	// Through a log node with cold caches. (The node that took the writes still serves the
	// uncompacted batches from its tail cache: the reader drops cached index entries on a
	// swap but not its tail cache; that is the reader's to fix.)
	sameRecords(t, "compacted", fetchAll(t, mustNode(c), "kv", 0, 0), want)
	// Running again changes nothing; a fresh compactor neither.
	es1, _ := c.entries(st, 0)
	comp2, _ := compaction.New(compaction.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 1 << 10, Now: func() time.Time { return now }, Logger: quiet()})
	if res, err := comp2.Partition(ctx, st.ID, 0); err != nil || res.Entries != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	es2, _ := c.entries(st, 0)
	if fmt.Sprint(es1) != fmt.Sprint(es2) {
		t.Fatal("a second compaction changed the index")
	}
	// Produce continues at the next offset; the replaced segments are retired.
	resp, err := c.api.Produce(ctx, meta.DefaultNS, "kv", []streamapi.Record{{Key: ptr("k1"), Value: json.RawMessage(`1`)}})
	if err != nil || resp.Offsets[0].Offset != 34 {
		t.Fatalf("%+v %v", resp, err)
	}
	retired, err := c.meta.ListRetired(ctx, "", 0)
	if err != nil || len(retired) == 0 {
		t.Fatalf("%v %v", retired, err)
	}
	c.checkNoOrphanSegments()
}

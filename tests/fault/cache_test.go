package fault

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/cluster"
)

// startFunctions runs the segmenter, retention, compaction and GC in the test process
// against the cluster's bucket and voters (the supervised cluster runs none), with short
// intervals so segments appear within seconds. They stop when the test ends.
func startFunctions(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	b, err := objstore.Open(ctx, filepath.Join(e.c.Dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	var rpcs []string
	for _, s := range e.c.File().Sequencers {
		rpcs = append(rpcs, s.RPC)
	}
	mc, err := metagrpc.Dial(ctx, rpcs)
	if err != nil {
		t.Fatal(err)
	}
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := devcluster.StartFunctions(b, mc, store, devcluster.FunctionsConfig{SegmentTargetBytes: 2 << 20,
		SegmentMaxAge: 2 * time.Second, SweepInterval: time.Second, WatchInterval: 250 * time.Millisecond}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		store.Close()
		mc.Close()
		b.Close()
	})
}

// coldValue is the value of cold record id: the id and 8 KiB derived from it, so a reader
// can tell a damaged record from a good one.
func coldValue(id string) string {
	h := sha256.Sum256([]byte(id))
	return id + ":" + strings.Repeat(fmt.Sprintf("%x", h[:4]), 1024)
}

// coldLoad writes records of coldValue to a stream through one node and reads the stream
// back through another, over and over from offset 0 and near its end (segment blocks: the
// disk cache), checking every record it reads.
type coldLoad struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	acked map[string][2]int64 // id → partition, offset
	sent  map[string]bool
	parts int32
	// reads counts the records read and checked; fetchErrs the fetches that failed, bad
	// the records that did not read back as written.
	reads, fetchErrs atomic.Int64
	lastFetchErr     string
	bad              []string
}

// startColdLoad starts writers goroutines through w, each sending 32 records (256 KiB) then
// pausing, and the readers through r.
func startColdLoad(t *testing.T, w, r *streamapi.Client, stream string, parts int32, writers int, pause time.Duration) *coldLoad {
	t.Helper()
	g := &coldLoad{stopc: make(chan struct{}), acked: map[string][2]int64{}, sent: map[string]bool{}, parts: parts}
	for wi := range writers {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-g.stopc:
					return
				default:
				}
				recs := make([]streamapi.Record, 32)
				ids := make([]string, len(recs))
				for j := range recs {
					ids[j] = fmt.Sprintf("c%d-%d-%d", wi, n, j)
					v, _ := json.Marshal(coldValue(ids[j]))
					recs[j] = streamapi.Record{Partition: ptr(int32(j) % parts), Value: v}
				}
				g.mu.Lock()
				for _, id := range ids {
					g.sent[id] = true
				}
				g.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				res, err := w.Produce(ctx, ns, stream, recs)
				cancel()
				if err == nil {
					g.mu.Lock()
					for j, id := range ids {
						g.acked[id] = [2]int64{int64(res.Offsets[j].Partition), res.Offsets[j].Offset}
					}
					g.mu.Unlock()
				}
				time.Sleep(pause)
			}
		}()
	}
	// Readers: one sweeps each partition from 0 to its end and starts again; one reads
	// the last few MiB (blocks of the newest segments).
	for _, tailOnly := range []bool{false, true} {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			next := make([]int64, parts)
			for {
				for q := range parts {
					select {
					case <-g.stopc:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					res, err := r.Fetch(ctx, ns, stream, q, next[q], 1<<20, 0)
					cancel()
					if err != nil {
						g.fetchErrs.Add(1)
						g.mu.Lock()
						g.lastFetchErr = fmt.Sprintf("fetch %s/%d@%d: %v", stream, q, next[q], err)
						g.mu.Unlock()
						time.Sleep(100 * time.Millisecond)
						continue
					}
					g.check(q, next[q], res)
					next[q] = res.NextOffset
					if next[q] >= res.HighWatermark {
						next[q] = 0
					}
					if tailOnly && res.HighWatermark-next[q] > 400 {
						next[q] = max(0, res.HighWatermark-400) // ~3 MiB of records from the end
					}
				}
			}
		}()
	}
	return g
}

func (g *coldLoad) note(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) < 50 {
		g.bad = append(g.bad, fmt.Sprintf(format, args...))
	}
}

// check checks the records of one fetch from offset from: each is a record written, with
// its bytes intact, at the offset it was acknowledged at.
func (g *coldLoad) check(q int32, from int64, res streamapi.FetchResponse) {
	for i, r := range res.Records {
		off := from + int64(i)
		var v string
		if err := json.Unmarshal(r.Value, &v); err != nil {
			g.note("partition %d offset %d: %v", q, off, err)
			continue
		}
		id, _, _ := strings.Cut(v, ":")
		g.mu.Lock()
		at, acked := g.acked[id]
		sent := g.sent[id]
		g.mu.Unlock()
		switch {
		case !sent:
			g.note("partition %d offset %d: %q was never sent", q, off, id)
		case v != coldValue(id):
			g.note("partition %d offset %d: %s read back damaged", q, off, id)
		case acked && at != [2]int64{int64(q), off}:
			g.note("partition %d offset %d: %s was acknowledged at %v", q, off, id, at)
		}
		g.reads.Add(1)
	}
}

// stop stops the load, reads the whole stream through cl and checks it: every acknowledged
// record present once at its offset with its bytes intact, nothing twice.
func (g *coldLoad) stop(t *testing.T, cl *streamapi.Client, stream string) string {
	t.Helper()
	close(g.stopc)
	g.wg.Wait()
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for q := range g.parts {
		var next int64
		for {
			res, err := cl.Fetch(ctx, ns, stream, q, next, 4<<20, 0)
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("read %s partition %d at %d: %v", stream, q, next, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			g.check(q, next, res)
			for _, r := range res.Records {
				var v string
				json.Unmarshal(r.Value, &v)
				id, _, _ := strings.Cut(v, ":")
				seen[id]++
			}
			next = res.NextOffset
			if next >= res.HighWatermark {
				break
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, n := range seen {
		if n > 1 {
			g.bad = append(g.bad, fmt.Sprintf("%s present %d times", id, n))
		}
	}
	for id := range g.acked {
		if seen[id] != 1 {
			g.bad = append(g.bad, fmt.Sprintf("acknowledged %s present %d times", id, seen[id]))
		}
	}
	if len(g.bad) > 0 {
		t.Fatalf("cold stream %s: %d problems:\n%s", stream, len(g.bad), strings.Join(g.bad[:min(len(g.bad), 30)], "\n"))
	}
	return fmt.Sprintf("%d records acknowledged (all present once at their offset, bytes intact), %d records read and checked during the run, %d fetches failed",
		len(g.acked), g.reads.Load(), g.fetchErrs.Load())
}

// TestNodeCacheDiskFull: node-1 keeps its disk cache of segment blocks (--cache-dir) on a
// 16 MiB tmpfs, with a cache bound of 1 GiB (the default) and memory caches too small to
// hold a block, so every segment read goes through the disk cache. The segmenter runs (in
// the test process), a writer fills a stream of 8 KiB records through node-2, and readers
// read it back through node-1, old data and new. Once the cache holds a few MiB, a filler
// takes every byte left on the tmpfs for a while, then is removed; afterwards the cache
// fills the tmpfs on its own and must go on taking the new blocks read (evicting its
// oldest). Every fetch must succeed (a full cache never fails a read the bucket can
// serve), every record read back intact, the write failures counted on node-1's /metrics
// (loam_disk_cache_write_errors_total{error="no_space"}) and warned about in its log; once
// space returns the cache grows again; the checker stays clean.
func TestNodeCacheDiskFull(t *testing.T) {
	var cacheDir string
	e := start(t, 1, 2, "cache", 4, cluster.Options{
		Prepare: func(dir string) {
			cacheDir = filepath.Join(dir, "node-1", "cache")
			mountTmpfs(t, cacheDir, "16m")
		},
		DevArgs: []string{"--child-args", "node-1=--chunk-cache-bytes 1 --tail-cache-bytes 1"},
	})
	ctx := context.Background()
	if _, err := e.c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "cold", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		for {
			if _, err := e.c.Client(i).GetStream(ctx, ns, "cold"); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	startFunctions(t, e)
	node1 := e.c.NodeURLs()[0]
	noSpace := func() float64 { return scrape(node1, "loam_disk_cache_write_errors_total", `error="no_space"`) }
	diskHits := func() float64 { return scrape(node1, "loam_fetch_spans_total", `source="disk"`) }
	waitFor := func(what string, within time.Duration, ok func() bool) time.Duration {
		t.Helper()
		from := time.Now()
		for !ok() {
			if time.Since(from) > within {
				held, _ := cacheFiles(cacheDir)
				t.Fatalf("%s: not within %s (cache files %.1f MiB, %.1f MiB free, no_space %.0f, disk hits %.0f)",
					what, within, float64(held)/(1<<20), float64(freeBytes(cacheDir))/(1<<20), noSpace(), diskHits())
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(from)
	}
	held := func() int64 { n, _ := cacheFiles(cacheDir); return n }

	l := cluster.NewLedger()
	load := e.load(l)
	cold := startColdLoad(t, e.c.Client(1), e.c.Client(0), "cold", 2, 2, 200*time.Millisecond)
	waitFor("node-1 caches segment blocks on disk (2 MiB)", 2*time.Minute, func() bool { return held() >= 2<<20 })

	// Something else fills the cache's filesystem.
	filler := fill(t, cacheDir)
	from := time.Now()
	before, readsBefore, errsBefore := noSpace(), cold.reads.Load(), cold.fetchErrs.Load()
	time.Sleep(2 * faultWindow())
	heldFull := held()
	fired := noSpace() - before
	readsFull, errsFull := cold.reads.Load()-readsBefore, cold.fetchErrs.Load()-errsBefore
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	during := countOutcomes(l, from, end)
	// Space returns: the cache grows past what it held while the disk was full, and then
	// fills the 16 MiB on its own (its bound is 1 GiB). From then on it must keep taking
	// the new blocks read, evicting its oldest: more new bytes than the space that was
	// left.
	grow := waitFor("the cache grows once space returns", 2*time.Minute, func() bool { return held() > heldFull+(1<<20) })
	waitFor("the cache fills its filesystem on its own (under 1 MiB free)", 3*time.Minute, func() bool { return freeBytes(cacheDir) < 1<<20 })
	_, old := cacheFiles(cacheDir)
	left := freeBytes(cacheDir)
	var fresh int64
	waitFor("the cache keeps taking new blocks once it filled its disk (2 MiB of new blocks)", 2*time.Minute, func() bool {
		_, now := cacheFiles(cacheDir)
		fresh = 0
		for name, size := range now {
			if _, ok := old[name]; !ok {
				fresh += size
			}
		}
		return fresh > left+(2<<20)
	})
	selfFired := noSpace() - before - fired
	hitsBefore := diskHits()
	waitFor("disk hits continue on a cache that filled its disk", time.Minute, func() bool { return diskHits() > hitsBefore })
	coldRep := cold.stop(t, e.c.Client(0), "cold")
	warned := e.c.CountInLogs("node-1", "disk cache filesystem full")
	rep := e.finish(load, l)
	t.Logf("FIGURE node_cache_full node-1 --cache-dir on a 16 MiB tmpfs: filled by another file for %s: %.0f cache writes found no space, cache held %.1f MiB, %d cold records read, %d fetches failed; produce during: %s; after space returned the cache grew within %s; once the cache filled the disk itself (%.0f more no-space writes) it took %.1f MiB of new blocks; %d warnings in node-1's log; cold stream: %s; lost: none (%d acknowledged attempts all present)",
		end.Sub(from).Round(time.Millisecond), fired, float64(heldFull)/(1<<20), readsFull, errsFull, during, grow.Round(time.Millisecond), selfFired, float64(fresh)/(1<<20), warned, coldRep, rep.Acked)
	if fired == 0 || selfFired == 0 {
		t.Fatalf("loam_disk_cache_write_errors_total{error=\"no_space\"} rose by %.0f while the disk was filled and by %.0f once the cache filled it: want both above 0", fired, selfFired)
	}
	if errsFull > 0 || cold.fetchErrs.Load() > 0 {
		t.Fatalf("%d fetches failed through node-1 (%d while its disk was full; the last: %s): a full cache must not fail a read the bucket serves", cold.fetchErrs.Load(), errsFull, cold.lastFetchErr)
	}
	if readsFull == 0 {
		t.Fatal("no cold record was read while the disk was full")
	}
	if warned == 0 {
		t.Fatal("node-1 logged no warning that its disk cache's filesystem is full")
	}
	if during.Acked*2 < during.total() {
		t.Fatalf("%s acknowledged while node-1's cache disk was full, want at least half", during)
	}
}

// cacheFiles is the bytes of the cache files in dir (not the filler, not temporary files)
// and their sizes by name.
func cacheFiles(dir string) (int64, map[string]int64) {
	ents, _ := os.ReadDir(dir)
	var sum int64
	files := map[string]int64{}
	for _, e := range ents {
		if e.Name() == "filler" || strings.HasPrefix(e.Name(), "tmp-") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			files[e.Name()] = info.Size()
			sum += info.Size()
		}
	}
	return sum, files
}

// freeBytes is the space left on dir's filesystem.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

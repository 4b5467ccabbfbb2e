package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// journalLeader is the log node (index) whose member leads the quorum journal, by the
// nodes' loam_journal_leader gauge; -1 while there is none.
func journalLeader(c *Cluster) int {
	for i, u := range c.NodeURLs() {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `loam_journal_leader{journal="j0"} 1`) {
			return i
		}
	}
	return -1
}

func waitJournalLeader(t *testing.T, c *Cluster, timeout time.Duration) int {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if i := journalLeader(c); i >= 0 {
			return i
		}
	}
	t.Fatalf("no journal leader within %s", timeout)
	return -1
}

// TestQuorumJournalKills is the quorum class's gate on real processes: loam dev
// --sequencers 3 --nodes 3 --journal-port P (node-1..node-3 are the journal's members),
// a quorum stream under load from several writers through every node and idempotent
// producers on a second one, then SIGKILL of the journal leader's node (five times), then
// of a follower's, then of the whole cluster and a restart.
// The checker finds nothing acknowledged lost or doubled and every partition's offsets
// dense and in order, and produce resumes within 3 s of each node kill.
func TestQuorumJournalKills(t *testing.T) {
	const stream, parts = "journaled", int32(4)
	port, _ := freePortRanges(t, 3, 1)
	// The journal's leader offloads by age every 2 s (inherited by the log nodes), so the
	// checker reads across segments and journal.
	t.Setenv("LOAM_JOURNAL_OFFLOAD_AGE", "2s")
	c := Start(t, bins, Options{Sequencers: 3, Nodes: 3, DevArgs: []string{"--journal-port", strconv.Itoa(port)}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The checker's load on one stream, idempotent producers on another, both of class quorum.
	for _, name := range []string{stream, stream + "-idem"} {
		if _, err := c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: name, Partitions: ptr(parts), Class: "quorum"}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			for {
				if _, err := c.Client(i).GetStream(ctx, ns, name); err == nil {
					break
				} else if ctx.Err() != nil {
					t.Fatalf("node %d never saw stream %s: %v", i, name, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	l := NewLedger()
	load, err := StartLoad(LoadConfig{Nodes: c.NodeURLs(), Stream: stream, Partitions: parts, Writers: 4, PerRequest: 20,
		ProbeEvery: 20 * time.Millisecond, Tailers: true}, l)
	if err != nil {
		t.Fatal(err)
	}
	idem := startIdempotent(t, c, stream+"-idem", parts, 3)
	time.Sleep(2 * time.Second)
	var gaps []time.Duration
	kill := func(what string, i int) {
		t.Helper()
		id := fmt.Sprintf("node-%d", i+1)
		at := time.Now()
		old := c.Kill(id)
		for {
			if d, ok := l.Resumption(at); ok {
				gaps = append(gaps, d)
				t.Logf("%s %s SIGKILLed: produce resumed after %s", what, id, d.Round(time.Millisecond))
				break
			}
			if time.Since(at) > 20*time.Second {
				t.Fatalf("produce did not resume within 20 s of killing %s %s", what, id)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.WaitRestarted(id, old, 15*time.Second)
		time.Sleep(2 * time.Second)
	}
	for range 5 {
		kill("journal leader", waitJournalLeader(t, c, 10*time.Second))
	}
	leaderGaps := slices.Clone(gaps)
	kill("journal follower", (waitJournalLeader(t, c, 10*time.Second)+1)%3)

	c.KillAll()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	c.Restart()
	for {
		if d, ok := l.Resumption(start); ok {
			t.Logf("whole cluster SIGKILLed and restarted: produce resumed %s after the restart began", d.Round(time.Millisecond))
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("no produce succeeded within 30 s of restarting the cluster")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	idem.stop()
	// Offloaded segments are in the bucket before the checker reads everything back.
	for deadline := time.Now().Add(30 * time.Second); countSegments(t, c.Dir) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no segment offloaded within 30 s")
		}
	}
	t.Logf("%d segments offloaded from the journal before the check", countSegments(t, c.Dir))
	finish(t, c, load, l, stream, parts)
	idem.check(t, c)
	slices.Sort(leaderGaps)
	t.Logf("produce resumption after %d journal-leader SIGKILLs: p50 %s, max %s", len(leaderGaps),
		leaderGaps[len(leaderGaps)/2].Round(time.Millisecond), slices.Max(leaderGaps).Round(time.Millisecond))
	if worst := slices.Max(gaps); worst >= 3*time.Second {
		t.Fatalf("produce took %s to resume after a node kill: limit 3 s", worst)
	}
}

// countSegments counts the segment objects (seg/…) in the cluster's bucket.
func countSegments(t *testing.T, dir string) int {
	t.Helper()
	b, err := objstore.NewFS(filepath.Join(dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	n := 0
	if err := b.List(context.Background(), "seg/", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// idempotentLoad is a few idempotent producers on their own stream's records (values
// {"p":…,"r":…,"k":…}), retrying every request whose answer they did not get (one in ten
// answers is thrown away after the write), switching nodes while one is down.
type idempotentLoad struct {
	stream string
	parts  int32
	per    int
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[[2]int]bool
	fails  chan error
	fts    []*failoverTransport
}

func startIdempotent(t *testing.T, c *Cluster, stream string, parts int32, producers int) *idempotentLoad {
	var urls []*url.URL
	for _, s := range c.NodeURLs() {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	il := &idempotentLoad{stream: stream, parts: parts, per: 3, cancel: cancel, acked: map[[2]int]bool{}, fails: make(chan error, producers)}
	for pi := range producers {
		ft := &failoverTransport{urls: urls, next: http.DefaultTransport}
		ft.cur.Store(int64(pi))
		il.fts = append(il.fts, ft)
		cl, err := streamapi.NewClient(c.NodeURLs()[0], streamapi.WithHTTPClient(&http.Client{Transport: ft, Timeout: 10 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		var pr *streamapi.IdempotentProducer
		for try := 0; pr == nil; try++ {
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			pr, err = cl.NewIdempotentProducer(pctx, ns, stream, fmt.Sprintf("journal-p%d", pi))
			pcancel()
			if err != nil && (!streamapi.IsRetriable(err) || try > 20) {
				t.Fatal(err)
			}
		}
		pr.MaxRetryTime = time.Minute
		il.wg.Add(1)
		go func() {
			defer il.wg.Done()
			for r := 0; ctx.Err() == nil; r++ {
				var recs []streamapi.Record
				for k := range il.per {
					q := int32((r + k) % int(parts))
					recs = append(recs, streamapi.Record{Partition: &q, Value: json.RawMessage(fmt.Sprintf(`{"p":%d,"r":%d,"k":%d}`, pi, r, k))})
				}
				if _, err := pr.Send(ctx, recs); err != nil {
					if ctx.Err() == nil {
						il.fails <- fmt.Errorf("idempotent producer %d request %d: %w", pi, r, err)
					}
					return
				}
				il.mu.Lock()
				il.acked[[2]int{pi, r}] = true
				il.mu.Unlock()
			}
		}()
	}
	return il
}

func (il *idempotentLoad) stop() {
	il.cancel()
	il.wg.Wait()
	close(il.fails)
}

// check reads the stream and finds every acknowledged idempotent record exactly once, each
// producer's records of a partition in order.
func (il *idempotentLoad) check(t *testing.T, c *Cluster) {
	t.Helper()
	for err := range il.fails {
		t.Fatal(err)
	}
	var lost int64
	for _, ft := range il.fts {
		lost += ft.lost.Load()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.Client(1)
	seen := map[string]int{}
	for q := range il.parts {
		last := map[int]int{}
		for off := int64(0); ; {
			res, err := cl.Fetch(ctx, ns, il.stream, q, off, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range res.Records {
				var v struct{ P, R, K *int }
				if err := json.Unmarshal(rec.Value, &v); err != nil || v.P == nil || v.R == nil || v.K == nil {
					t.Fatalf("partition %d offset %d: not a producer's record: %s", q, *rec.Offset, rec.Value)
				}
				id := fmt.Sprintf("%d/%d/%d", *v.P, *v.R, *v.K)
				if seen[id]++; seen[id] > 1 {
					t.Errorf("idempotent record %s stored twice (partition %d offset %d)", id, q, *rec.Offset)
				}
				if at, ok := last[*v.P]; ok && at >= *v.R*il.per+*v.K {
					t.Errorf("partition %d: producer %d's record %s is out of order", q, *v.P, id)
				}
				last[*v.P] = *v.R*il.per + *v.K
			}
			off = res.NextOffset
			if off >= res.HighWatermark {
				break
			}
		}
	}
	missing := 0
	for a := range il.acked {
		for k := range il.per {
			if seen[fmt.Sprintf("%d/%d/%d", a[0], a[1], k)] != 1 {
				missing++
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d acknowledged idempotent records missing", missing)
	}
	if lost == 0 || len(il.acked) < 10 {
		t.Fatalf("idempotent load too small: %d requests acknowledged, %d answers lost", len(il.acked), lost)
	}
	t.Logf("idempotent producers: %d requests acknowledged, %d answers lost and retried, %d records each stored once", len(il.acked), lost, len(seen))
}

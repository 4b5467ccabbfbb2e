package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/cluster"
)

// TestZoneLossQuorum is the zone loss of the quorum class: three voters and three log
// nodes in zones a, b and c (`loam dev --sequencers 3 --nodes 3 --zones a,b,c
// --journal-port P`: node-1..node-3 are the journal's members, one per zone), a quorum
// stream loaded through every node, idempotent producers on a second quorum stream
// through the other zones' nodes, and the journal offloading by age every 2 s. The zone
// of the journal leader's node is made the sequencer leader's zone too (the sequencer
// leader is SIGKILLed until a voter of that zone leads, before the load starts), then
// every process of that zone is SIGKILLed at once, kept down for faultWindow and brought
// back: the journal elects a leader on the two members left and the sequencer on its two
// voters, at the same time. Produce must resume within 15 s, at least half the requests
// sent during the outage be acknowledged, offload go on under the new leaders, and the
// checker, reading every partition from offset 0 across the segments and the journal
// through every node (the returned one included), find nothing lost, doubled or out of
// order; the idempotent producers' records each once at their offset, in order.
func TestZoneLossQuorum(t *testing.T) {
	const stream, parts = "qzone", int32(4)
	port := freeRun(t, 3)
	// The journal's leader offloads by age every 2 s (the log nodes inherit it), so the
	// checker reads across segments and journal, and offload runs across the failover.
	t.Setenv("LOAM_JOURNAL_OFFLOAD_AGE", "2s")
	e := startClass(t, 3, 3, stream, parts, "quorum",
		cluster.Options{DevArgs: []string{"--zones", "a,b,c", "--journal-port", strconv.Itoa(port)}}, stream+"-idem")
	cf := e.c.File()
	zone, seqLeader, moves := colocateLeaders(t, e.c, 6)
	l := cluster.NewLedger()
	load := e.load(l)
	time.Sleep(2 * time.Second)
	if jl := journalLeaderZone(e); jl != zone {
		t.Logf("the journal leader moved to zone %q under load (was %q)", jl, zone)
		var more int
		zone, seqLeader, more = colocateLeaders(t, e.c, 6)
		moves += more
	}

	var ids, survivors []string
	for _, s := range cf.Sequencers {
		if s.Zone == zone {
			ids = append(ids, s.ID)
		}
	}
	for i, n := range cf.Nodes {
		if n.Zone == zone {
			ids = append(ids, n.ID)
		} else {
			survivors = append(survivors, e.c.NodeURLs()[i])
		}
	}
	if len(ids) != 2 || len(survivors) != 2 {
		t.Fatalf("zone %q holds %v, want one voter and one log node", zone, ids)
	}

	idem := startHTTPIdempotent(t, survivors, stream+"-idem", parts)
	time.Sleep(2 * time.Second)
	segsBefore := countSegments(t, e.c.Dir)

	pids := map[string]int{}
	for _, id := range ids {
		e.c.Hold(id)
	}
	for _, id := range ids {
		pids[id] = e.c.Signal(id, syscall.SIGKILL)
	}
	killed := time.Now()
	rec := recovery(t, l, killed, 30*time.Second)
	newJournal := journalLeaderZone(e)
	time.Sleep(faultWindow())
	segsDown := countSegments(t, e.c.Dir)
	for _, id := range ids {
		e.c.Release(id)
	}
	back := time.Now()
	for _, id := range ids {
		e.c.WaitRestarted(id, pids[id], 30*time.Second)
	}
	// The returned member catches up from the leader's log or snapshot.
	time.Sleep(3 * time.Second)
	during := countOutcomes(l, killed, back)
	idemRep := idem.stop(t, e.c.Client(0), stream+"-idem")
	if err := idem.inOrder(); err != nil {
		t.Fatal(err)
	}
	// Offloaded segments are in the bucket before the checker reads everything back.
	for deadline := time.Now().Add(30 * time.Second); countSegments(t, e.c.Dir) <= segsDown; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no segment offloaded after the zone returned (%d before the kill, %d while it was down)", segsBefore, segsDown)
		}
	}
	rep := e.finish(load, l)
	segs := countSegments(t, e.c.Dir)
	t.Logf("idempotent producers through %v: %s", survivors, idemRep)
	t.Logf("FIGURE zone_loss_quorum zone=%s (%v: the journal leader's node and %s; sequencer leader moved there by %d kills); "+
		"journal leader after: zone %s; during: %s; produce resumed %s after the kill; segments offloaded %d before the kill, %d by its end, %d in all; "+
		"lost: none (%d acknowledged attempts all present)",
		zone, ids, seqLeader, moves, newJournal, during, rec.Round(time.Millisecond), segsBefore, segsDown, segs, rep.Acked)
	if rec > 15*time.Second {
		t.Fatalf("produce resumed %s after the zone's loss: limit 15 s", rec)
	}
	if during.Acked*2 < during.total() {
		t.Fatalf("%s acknowledged while the zone was down, want at least half", during)
	}
	if segsDown <= segsBefore {
		t.Fatalf("no segment offloaded while the zone was down (%d before the kill, %d at its end): offload did not go on under the new leaders", segsBefore, segsDown)
	}
}

// colocateLeaders returns the zone of the journal leader's node once the sequencer leader
// is a voter of that zone too, SIGKILLing the sequencer leader (at most tries times) while
// it is not; the result says which voter leads ("a follower: …" when it never got there)
// and how many kills it took.
func colocateLeaders(t *testing.T, c *cluster.Cluster, tries int) (zone, seqLeader string, kills int) {
	t.Helper()
	e := &env{t: t, c: c}
	for {
		zone = waitJournalLeaderZone(e, 15*time.Second)
		leader := c.WaitLeader(15 * time.Second)
		if leader.Zone == zone {
			return zone, "voter " + leader.ID + " (the sequencer leader)", kills
		}
		if kills == tries {
			var in []string
			for _, s := range c.File().Sequencers {
				if s.Zone == zone {
					in = append(in, s.ID)
				}
			}
			t.Logf("the sequencer leader %s is not in the journal leader's zone %s after %d kills: zone %s holds followers %v", leader.ID, zone, kills, zone, in)
			return zone, fmt.Sprintf("follower voters %v (the leader %s in zone %s)", in, leader.ID, leader.Zone), kills
		}
		old := c.Kill(leader.ID)
		kills++
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			l, err := c.Leader(ctx)
			cancel()
			if err == nil && l.ID != leader.ID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new sequencer leader within 15 s of killing %s", leader.ID)
			}
		}
		c.WaitRestarted(leader.ID, old, 15*time.Second)
	}
}

// journalLeaderZone is the zone of the log node whose member leads the static journal
// (its loam_journal_leader{journal="j0"} gauge is 1), "" while none does.
func journalLeaderZone(e *env) string {
	nodes := e.c.File().Nodes
	for i, u := range e.c.NodeURLs() {
		if scrape(u, "loam_journal_leader", `journal="j0"`) == 1 {
			return nodes[i].Zone
		}
	}
	return ""
}

func waitJournalLeaderZone(e *env, timeout time.Duration) string {
	e.t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if z := journalLeaderZone(e); z != "" {
			return z
		}
	}
	e.t.Fatalf("no journal leader within %s", timeout)
	return ""
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

// httpIdempotent is exactlyOnce fed by idempotent HTTP producers (streamapi
// IdempotentProducer), one per node URL, whose transport throws away one answer in ten
// after the request was served, so the producer retries writes that happened.
type httpIdempotent struct {
	*exactlyOnce
	lost atomic.Int64
}

// startHTTPIdempotent starts one idempotent producer per node of urls on stream, each
// sending requests of three records (ids "hi<producer>-<n>-<j>", record j to partition
// (n+j) mod parts) one after the other, every Send retried for up to 90 s.
func startHTTPIdempotent(t *testing.T, urls []string, stream string, parts int32) *httpIdempotent {
	t.Helper()
	h := &httpIdempotent{exactlyOnce: newExactlyOnce(parts)}
	for pi, u := range urls {
		cl, err := streamapi.NewClient(u, streamapi.WithHTTPClient(&http.Client{Transport: &lossyTransport{next: http.DefaultTransport, lost: &h.lost}, Timeout: 10 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		var pr *streamapi.IdempotentProducer
		for try := 0; pr == nil; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			pr, err = cl.NewIdempotentProducer(ctx, ns, stream, fmt.Sprintf("zone-quorum-p%d", pi))
			cancel()
			if err != nil && (!streamapi.IsRetriable(err) || try > 20) {
				t.Fatal(err)
			}
		}
		pr.MaxRetryTime = 90 * time.Second
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for n := 0; !h.stopping(); n++ {
				ids := make([]string, 3)
				recs := make([]streamapi.Record, len(ids))
				for j := range ids {
					ids[j] = fmt.Sprintf("hi%d-%d-%d", pi, n, j)
					v, _ := json.Marshal(ids[j])
					recs[j] = streamapi.Record{Partition: ptr(int32((n + j) % int(parts))), Value: v}
				}
				h.send(ids)
				res, err := pr.Send(context.Background(), recs)
				for j, id := range ids {
					if err != nil || j >= len(res.Offsets) {
						h.answer(id, 0, 0, cmpErr(err, errors.New("short answer")))
						continue
					}
					h.answer(id, res.Offsets[j].Partition, res.Offsets[j].Offset, nil)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	return h
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// stop stops the producers and checks the stream through cl (exactlyOnce.stop), adding
// how many answers were thrown away.
func (h *httpIdempotent) stop(t *testing.T, cl *streamapi.Client, stream string) string {
	t.Helper()
	s := h.exactlyOnce.stop(t, cl, stream)
	if len(h.acked) < 30 || h.lost.Load() == 0 {
		t.Fatalf("idempotent load too small: %d records acknowledged, %d answers lost", len(h.acked), h.lost.Load())
	}
	return fmt.Sprintf("%s; %d answers thrown away and retried", s, h.lost.Load())
}

// inOrder checks that each producer's acknowledged records of a partition sit at
// increasing offsets in the order it sent them (stop checked each is at its offset).
func (h *httpIdempotent) inOrder() error {
	type rec struct {
		n, j int
		off  int64
	}
	by := map[[2]int64][]rec{} // producer, partition
	for id, w := range h.acked {
		var pi, n, j int
		if _, err := fmt.Sscanf(id, "hi%d-%d-%d", &pi, &n, &j); err != nil {
			return fmt.Errorf("idempotent record id %q: %w", id, err)
		}
		k := [2]int64{int64(pi), w[0]}
		by[k] = append(by[k], rec{n, j, w[1]})
	}
	var bad []string
	for k, rs := range by {
		sort.Slice(rs, func(a, b int) bool { return rs[a].n < rs[b].n || (rs[a].n == rs[b].n && rs[a].j < rs[b].j) })
		for i := 1; i < len(rs); i++ {
			if rs[i].off <= rs[i-1].off {
				bad = append(bad, fmt.Sprintf("producer %d partition %d: hi%d-%d-%d at %d after hi%d-%d-%d at %d",
					k[0], k[1], k[0], rs[i].n, rs[i].j, rs[i].off, k[0], rs[i-1].n, rs[i-1].j, rs[i-1].off))
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("idempotent records out of order:\n%s", strings.Join(bad[:min(len(bad), 30)], "\n"))
	}
	return nil
}

// lossyTransport throws away one answer in ten to a POST after the request was served:
// the client cannot tell whether the write happened, as when a connection breaks after
// the commit.
type lossyTransport struct {
	next http.RoundTripper
	lost *atomic.Int64
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && rand.N(10) == 0 {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l.lost.Add(1)
		return nil, errors.New("answer lost")
	}
	return resp, err
}

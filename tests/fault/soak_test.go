package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/cluster"
)

// soakDuration is LOAM_SOAK (a Go duration; the long run: LOAM_SOAK=10m), else 60 s.
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("LOAM_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("LOAM_SOAK=%q: want a duration such as 10m", s)
		}
		return d
	}
	return 60 * time.Second
}

// soakEvent is one fault or kill the scheduler injected.
type soakEvent struct {
	Kind       string
	Start, End time.Time
	Recovery   time.Duration // first success of a request sent after End
	Fired      float64       // object-store faults: the counter's rise on the nodes
}

// TestSoak runs three voters and two log nodes under mixed load for LOAM_SOAK (60 s by
// default; `LOAM_SOAK=10m go test -run TestSoak -timeout 30m ./tests/fault` is the long
// run): the HTTP load generator (plain produce, retried as new attempts, with tailers)
// and idempotent producers, while a scheduler injects at random, one at a time, every
// object-store fault of the suite, SIGKILLs of a log node, of a follower and of the leader,
// and (where a tmpfs mounts) node-1's disk cache filled by another file. The segmenter,
// compaction, retention and GC run in the test process against the same bucket, so
// fetches of older data go through segments and node-1's disk cache.
// Beside them, each in its own stream with its own check: plain produce over gRPC
// (loam.v1), idempotent batching producers over gRPC (streamapi.Producer), and idempotent
// Kafka producers (franz-go, acks=all) through the nodes' Kafka listeners, and a stream of
// 8 KiB records written through node-2 and read back over and over through node-1, every
// record checked byte for byte (old data comes from segments: node-1's disk cache). The checker
// runs at the end, the idempotent records are checked exactly once, and a report lists the
// faults injected, the requests by outcome and the recovery times.
func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("soak for %s, seed %d", dur, seed)
	grpcPort := freeRun(t, 4) // gRPC on the first two, Kafka on the next two
	kafkaPort := grpcPort + 2
	var cacheDir string // node-1's disk cache, on a tmpfs the scheduler fills (when it mounts)
	e := start(t, 3, 2, "soak", 4, cluster.Options{
		DevArgs: []string{"--grpc-port", strconv.Itoa(grpcPort), "--kafka-port", strconv.Itoa(kafkaPort)},
		Prepare: func(dir string) {
			d := filepath.Join(dir, "node-1", "cache")
			if err := tryTmpfs(t, d, "32m"); err != nil {
				t.Logf("no cache_full events: cannot mount a tmpfs for node-1's cache: %v", err)
				return
			}
			cacheDir = d
		}})
	startFunctions(t, e) // segments, compaction, retention and GC run under the faults too
	ctx := context.Background()
	for _, s := range []string{"idem", "grpc", "gidem", "kafka", "cold"} {
		if _, err := e.c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: s, Partitions: ptr(int32(2))}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			for {
				if _, err := e.c.Client(i).GetStream(ctx, ns, s); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	l := cluster.NewLedger()
	load := e.load(l)
	idem := startIdempotent(t, e, 2)
	grpcAddrs := []string{"127.0.0.1:" + strconv.Itoa(grpcPort), "127.0.0.1:" + strconv.Itoa(grpcPort+1)}
	grpcl := startGRPCLoad(t, grpcAddrs, "grpc", 2)
	gidem := startGRPCIdempotent(t, grpcAddrs, "gidem", 2)
	kafka := startKafka(t, []string{"127.0.0.1:" + strconv.Itoa(kafkaPort), "127.0.0.1:" + strconv.Itoa(kafkaPort+1)}, "kafka", 2)
	cold := startColdLoad(t, e.c.Client(1), e.c.Client(0), "cold", 2, 1, time.Second)

	var events []soakEvent
	deadline := time.Now().Add(dur)
	kinds := []string{"kill_node", "kill_follower", "kill_leader"}
	for _, f := range objstoreFaults {
		if f.survives {
			kinds = append(kinds, f.name)
		}
	}
	if cacheDir != "" {
		kinds = append(kinds, "cache_full")
	}
	time.Sleep(2 * time.Second)
	for time.Now().Add(8 * time.Second).Before(deadline) {
		kind := kinds[rng.IntN(len(kinds))]
		ev := soakEvent{Kind: kind, Start: time.Now()}
		switch kind {
		case "kill_node":
			id := e.c.File().Nodes[rng.IntN(2)].ID
			ev.Kind += " " + id
			old := e.c.Kill(id)
			ev.End = time.Now()
			e.c.WaitRestarted(id, old, 30*time.Second)
		case "kill_follower", "kill_leader":
			leader := e.c.WaitLeader(15 * time.Second)
			id := leader.ID
			if kind == "kill_follower" {
				for _, s := range e.c.File().Sequencers {
					if s.ID != leader.ID {
						id = s.ID
						break
					}
				}
			}
			ev.Kind += " " + id
			old := e.c.Kill(id)
			ev.End = time.Now()
			e.c.WaitRestarted(id, old, 30*time.Second)
		case "cache_full":
			// Another file takes every byte left on node-1's cache disk for a while.
			node1 := e.c.NodeURLs()[0]
			before := scrape(node1, "loam_disk_cache_write_errors_total", `error="no_space"`)
			filler := fill(t, cacheDir)
			time.Sleep(time.Duration(2000+rng.IntN(2000)) * time.Millisecond)
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			ev.End = time.Now()
			ev.Fired = max(0, scrape(node1, "loam_disk_cache_write_errors_total", `error="no_space"`)-before) // 0 if node-1 restarted
		default:
			var profile, fault string
			for _, f := range objstoreFaults {
				if f.name == kind {
					profile, fault = f.profile, f.fault
				}
			}
			before := e.faultCount(fault)
			e.setProfile(profile)
			time.Sleep(time.Duration(2000+rng.IntN(2000)) * time.Millisecond)
			e.setProfile(noFaults)
			ev.End = time.Now()
			time.Sleep(1100 * time.Millisecond) // the nodes re-read the file every second
			ev.Fired = e.faultCount(fault) - before
		}
		ev.Recovery = recovery(t, l, ev.End, 60*time.Second)
		events = append(events, ev)
		time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
	}
	time.Sleep(time.Until(deadline))
	idemRep := idem.stop(t, e)
	grpcRep := grpcl.stop(t, e, "grpc")
	gidemRep := gidem.stop(t, e.c.Client(0), "gidem")
	kafkaRep := kafka.stop(t, e.c.Client(0), "kafka")
	coldRep := cold.stop(t, e.c.Client(0), "cold")
	all := countOutcomes(l, time.Time{}, time.Now())
	rep := e.finish(load, l)

	var b strings.Builder
	fmt.Fprintf(&b, "SOAK REPORT (%s, seed %d)\n", dur, seed)
	fmt.Fprintf(&b, "  plain HTTP produce: %s\n", all)
	fmt.Fprintf(&b, "  idempotent produce (HTTP): %s\n", idemRep)
	fmt.Fprintf(&b, "  plain gRPC produce: %s\n", grpcRep)
	fmt.Fprintf(&b, "  idempotent produce (gRPC): %s\n", gidemRep)
	fmt.Fprintf(&b, "  idempotent Kafka produce (franz-go): %s\n", kafkaRep)
	fmt.Fprintf(&b, "  cold reads through node-1 of 8 KiB records written through node-2: %s\n", coldRep)
	fmt.Fprintf(&b, "  checker: %s\n", rep)
	byKind := map[string][]time.Duration{}
	for _, ev := range events {
		k := strings.Fields(ev.Kind)[0]
		byKind[k] = append(byKind[k], ev.Recovery)
		fired := ""
		if ev.Fired > 0 {
			fired = fmt.Sprintf(", fired %.0f", ev.Fired)
		}
		fmt.Fprintf(&b, "  %6.1fs %-24s %5.1fs long%s, produce recovered %s after\n", ev.Start.Sub(deadline.Add(-dur)).Seconds(), ev.Kind,
			ev.End.Sub(ev.Start).Seconds(), fired, ev.Recovery.Round(time.Millisecond))
	}
	ks := make([]string, 0, len(byKind))
	for k := range byKind {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		ds := byKind[k]
		worst := time.Duration(0)
		for _, d := range ds {
			worst = max(worst, d)
		}
		fmt.Fprintf(&b, "  %-16s injected %d times, worst recovery %s\n", k, len(ds), worst.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  lost: none (every acknowledged record present exactly once)")
	t.Log(b.String())
	if len(events) == 0 {
		t.Fatal("the scheduler injected nothing")
	}
}

// idempotent runs idempotent producers, one per log node, each sending records whose
// values name a unique id, and remembers what was acknowledged.
type idempotent struct {
	stopc  chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[string]bool // id → acknowledged
	sent   map[string]bool
	failed int
	parts  int32
}

func startIdempotent(t *testing.T, e *env, parts int32) *idempotent {
	t.Helper()
	p := &idempotent{stopc: make(chan struct{}), acked: map[string]bool{}, sent: map[string]bool{}, parts: parts}
	for i := range len(e.c.NodeURLs()) {
		prod, err := e.c.Client(i).NewIdempotentProducer(context.Background(), ns, "idem", "")
		if err != nil {
			t.Fatal(err)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-p.stopc:
					return
				default:
				}
				recs := make([]streamapi.Record, 5)
				ids := make([]string, len(recs))
				for j := range recs {
					ids[j] = fmt.Sprintf("p%d-%d-%d", i, n, j)
					v, _ := json.Marshal(ids[j])
					recs[j] = streamapi.Record{Partition: ptr(int32(j) % parts), Value: v}
				}
				p.mu.Lock()
				for _, id := range ids {
					p.sent[id] = true
				}
				p.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := prod.Send(ctx, recs)
				cancel()
				p.mu.Lock()
				if err == nil {
					for _, id := range ids {
						p.acked[id] = true
					}
				} else {
					p.failed++
				}
				p.mu.Unlock()
				if err != nil && !streamapi.IsRetriable(err) && streamapi.IsProducerRefusal(err) {
					// A definite refusal of the producer (fenced, say): start a new one.
					if np, err := e.c.Client(i).NewIdempotentProducer(context.Background(), ns, "idem", ""); err == nil {
						prod = np
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return p
}

// stop stops the producers and checks the idempotent stream: every acknowledged record
// present exactly once, no record twice, nothing that was not sent.
func (p *idempotent) stop(t *testing.T, e *env) string {
	t.Helper()
	close(p.stopc)
	p.wg.Wait()
	seen := map[string]int{}
	cl := e.c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for q := range p.parts {
		var next int64
		for {
			resp, err := cl.Fetch(ctx, ns, "idem", q, next, 4<<20, 0)
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("read idem partition %d: %v", q, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for _, r := range resp.Records {
				var id string
				if err := json.Unmarshal(r.Value, &id); err != nil {
					t.Fatalf("idem partition %d offset %d: %v", q, next, err)
				}
				seen[id]++
				next++
			}
			if next >= resp.HighWatermark {
				break
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var bad []string
	for id, n := range seen {
		if n > 1 {
			bad = append(bad, fmt.Sprintf("%s present %d times", id, n))
		}
		if !p.sent[id] {
			bad = append(bad, id+" never sent")
		}
	}
	for id := range p.acked {
		if seen[id] != 1 {
			bad = append(bad, fmt.Sprintf("acknowledged %s present %d times", id, seen[id]))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("idempotent stream: %d violations:\n%s", len(bad), strings.Join(bad[:min(len(bad), 30)], "\n"))
	}
	return fmt.Sprintf("%d records sent, %d acknowledged (all present once), %d sends failed, %d records in the stream (none twice)",
		len(p.sent), len(p.acked), p.failed, len(seen))
}

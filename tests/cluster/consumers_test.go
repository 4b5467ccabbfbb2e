package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// consumed is one record a consumer member printed.
type consumed struct {
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Value     json.RawMessage `json:"value"`
}

// member is a `loam consume STREAM --consumer NAME --follow` child process.
type member struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// stderr is written by the process until done is closed; read it only after.
	stderr strings.Builder

	mu   sync.Mutex
	recs []consumed
	bad  []string
}

func startMember(t *testing.T, server, stream, consumer, name string) *member {
	t.Helper()
	m := &member{name: name, done: make(chan struct{})}
	m.cmd = exec.Command(bins.Loam, "--server", server, "consume", stream, "--consumer", consumer, "--member", name,
		"--follow", "--session", "4s", "--format", "json")
	m.cmd.Stderr = &m.stderr
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r consumed
			err := json.Unmarshal(sc.Bytes(), &r)
			m.mu.Lock()
			if err != nil {
				m.bad = append(m.bad, sc.Text())
			} else {
				m.recs = append(m.recs, r)
			}
			m.mu.Unlock()
		}
		m.cmd.Wait()
	}()
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			t.Logf("member %s stderr (last 2000 bytes):\n%s", name, lastBytes(m.stderr.String(), 2000))
		}
	})
	return m
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (m *member) kill() {
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

func (m *member) snapshot() []consumed {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]consumed(nil), m.recs...)
}

// TestNamedConsumerUnderKills is the named-consumer gate on real processes. A member of a
// named consumer (`loam consume --consumer --follow --session 4s`, a child process) reads
// a 3-partition stream while a producer writes to it: m1 (on node-1) is SIGKILLed and m2
// resumes exactly at the committed offsets; node-1 is SIGKILLed, restarted by the
// supervisor, and m2 goes on reading and committing; node-1 is SIGKILLed again and held
// down, m2 is SIGKILLed and m3, pointed at node-2, resumes at the committed offsets; then
// the sequencer leader is SIGKILLed and m3 goes on. In the end every record has been
// consumed, in offset order per partition with no gap (each member contiguous from where
// it started, duplicates only of what a killed member printed after its last commit),
// byte for byte as the log holds it, and the committed offsets equal the high watermarks.
func TestNamedConsumerUnderKills(t *testing.T) {
	const stream, parts, group = "cons", int32(3), "app"
	start := time.Now()
	c := setup(t, Options{Sequencers: 3, Nodes: 2, FlushInterval: 20 * time.Millisecond}, stream, parts)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	urls := c.NodeURLs()
	clients := []*streamapi.Client{c.Client(0), c.Client(1)}

	// The producer: batches of 6 records (two per partition), each retried, on the other
	// node, until acknowledged. A retried batch may be stored twice: the check compares
	// what was consumed with what the log holds, and requires every acknowledged offset.
	var (
		pmu    sync.Mutex
		acked  = map[int32]map[int64]bool{}
		nAcked int
		retry  int
	)
	pctx, pstop := context.WithCancel(ctx)
	pdone := make(chan error, 1)
	go func() {
		node := 0
		for b := 0; pctx.Err() == nil; b++ {
			var recs []streamapi.Record
			for k := range 2 * int(parts) {
				q := int32(k % int(parts))
				recs = append(recs, streamapi.Record{Partition: &q, Value: json.RawMessage(fmt.Sprintf(`{"b":%d,"k":%d}`, b, k))})
			}
			for try := 0; ; try++ {
				rctx, rcancel := context.WithTimeout(pctx, 10*time.Second)
				res, err := clients[node].Produce(rctx, ns, stream, recs)
				rcancel()
				if err == nil {
					pmu.Lock()
					for _, o := range res.Offsets {
						if acked[o.Partition] == nil {
							acked[o.Partition] = map[int64]bool{}
						}
						acked[o.Partition][o.Offset] = true
						nAcked++
					}
					pmu.Unlock()
					break
				}
				if pctx.Err() != nil {
					pdone <- nil
					return
				}
				if !streamapi.IsRetriable(err) && !errors.Is(err, streamapi.ErrNetwork) || try > 200 {
					pdone <- fmt.Errorf("batch %d: %w", b, err)
					return
				}
				pmu.Lock()
				retry++
				pmu.Unlock()
				node = 1 - node
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond)
		}
		pdone <- nil
	}()
	ackedCount := func() int { pmu.Lock(); defer pmu.Unlock(); return nAcked }

	describe := func() streamapi.ConsumerDescription {
		t.Helper()
		for {
			for _, cl := range clients {
				dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
				d, err := cl.DescribeConsumer(dctx, ns, group)
				dcancel()
				if err == nil {
					return d
				}
				if ctx.Err() != nil {
					t.Fatalf("describe consumer: %v", err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// waitFor polls cond until it holds or the test's deadline passes.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// reachesNew waits until the producer has had 10 more batches acknowledged and member m
	// has printed, in every partition, the last offset acknowledged by then: records
	// written after whatever happened just before.
	reachesNew := func(m *member, what string) {
		t.Helper()
		from := ackedCount()
		waitFor("10 more batches acknowledged "+what, func() bool { return ackedCount() >= from+10*2*int(parts) })
		pmu.Lock()
		marks := map[int32]int64{}
		for q, offs := range acked {
			for o := range offs {
				marks[q] = max(marks[q], o)
			}
		}
		pmu.Unlock()
		waitFor(fmt.Sprintf("member %s to print offsets %v %s", m.name, marks, what), func() bool {
			got := map[int32]int64{}
			for _, r := range m.snapshot() {
				got[r.Partition] = max(got[r.Partition], r.Offset)
			}
			for q, o := range marks {
				if got[q] < o {
					return false
				}
			}
			return true
		})
		// ... and committed past them (it commits at its heartbeats, every session/3).
		waitFor(fmt.Sprintf("member %s to commit past offsets %v %s", m.name, marks, what), func() bool {
			d := describe()
			for _, p := range d.Partitions {
				if p.Holder != m.name || p.Committed <= marks[p.Partition] {
					return false
				}
			}
			return len(d.Partitions) == int(parts)
		})
	}
	// progressed waits until member m has printed n more records than it had.
	progressed := func(m *member, n int) {
		t.Helper()
		from := len(m.snapshot())
		waitFor(fmt.Sprintf("member %s to print %d more records", m.name, n), func() bool { return len(m.snapshot()) >= from+n })
	}

	// handover SIGKILLs member m and waits until its leases lapsed (its session is 4 s), when
	// the committed offsets no longer move; it returns them, checking that m printed every
	// record below them.
	handover := func(m *member) map[int32]int64 {
		t.Helper()
		m.kill()
		var committed map[int32]int64
		waitFor(fmt.Sprintf("member %s's membership to end", m.name), func() bool {
			d := describe()
			if len(d.Members) > 0 {
				return false
			}
			committed = map[int32]int64{}
			for _, p := range d.Partitions {
				if p.Holder != "" {
					return false
				}
				committed[p.Partition] = p.Committed
			}
			return true
		})
		printed := perPartition(m.snapshot())
		t.Logf("member %s SIGKILLed after printing %d records; committed %v; it had printed up to %v", m.name, len(m.snapshot()), committed, lastOffsets(printed, parts))
		for q := range parts {
			rs := printed[q]
			if len(rs) == 0 || committed[q] < 1 || committed[q] > rs[len(rs)-1].Offset+1 {
				t.Fatalf("partition %d: committed %d, but member %s printed offsets up to %v", q, committed[q], m.name, lastOffset(rs))
			}
		}
		return committed
	}
	// resumes waits until member m printed records of every partition and checks each
	// partition's first is at its committed offset.
	resumes := func(m *member, committed map[int32]int64) {
		t.Helper()
		waitFor(fmt.Sprintf("member %s to print records of every partition", m.name), func() bool { return len(perPartition(m.snapshot())) == int(parts) })
		for q, rs := range perPartition(m.snapshot()) {
			if rs[0].Offset != committed[q] {
				t.Fatalf("partition %d: member %s started at offset %d, committed was %d", q, m.name, rs[0].Offset, committed[q])
			}
		}
		t.Logf("member %s resumed at the committed offsets", m.name)
	}

	// Member m1 talks to node-1 (urls[0]); it commits, is SIGKILLed, and m2 resumes.
	waitFor("records acknowledged", func() bool { return ackedCount() >= 60 })
	members := []*member{startMember(t, urls[0], stream, group, "m1")}
	starts := []map[int32]int64{{0: 0, 1: 0, 2: 0}}
	m1 := members[0]
	progressed(m1, 100)
	waitFor("member m1 to commit", func() bool {
		n := 0
		for _, p := range describe().Partitions {
			if p.Committed > 0 {
				n++
			}
		}
		return n == int(parts)
	})
	progressed(m1, 30)
	committed := handover(m1)
	m2 := startMember(t, urls[0], stream, group, "m2")
	members, starts = append(members, m2), append(starts, committed)
	resumes(m2, committed)
	progressed(m2, 60)

	// SIGKILL the log node m2 talks to; the supervisor restarts it and m2 goes on (it
	// retries with --follow).
	old := c.Kill("node-1")
	t.Logf("node-1 (m2's node) SIGKILLed")
	c.WaitRestarted("node-1", old, 20*time.Second)
	reachesNew(m2, "after node-1's SIGKILL")
	t.Logf("member m2 went on after node-1's restart")

	// SIGKILL node-1 again and keep it down: m2 is stuck, so it is SIGKILLed too and m3,
	// pointed at node-2, resumes at the committed offsets.
	c.Hold("node-1")
	old = c.Kill("node-1")
	t.Logf("node-1 SIGKILLed and held down")
	committed = handover(m2)
	m3 := startMember(t, urls[1], stream, group, "m3")
	members, starts = append(members, m3), append(starts, committed)
	resumes(m3, committed)
	reachesNew(m3, "through node-2")
	c.Release("node-1")
	c.WaitRestarted("node-1", old, 20*time.Second)

	leader := c.WaitLeader(15 * time.Second)
	old = c.Kill(leader.ID)
	t.Logf("sequencer leader %s SIGKILLed", leader.ID)
	// A leader just killed may still be named by a voter that has not noticed: wait for
	// another one.
	var next string
	waitFor("a new sequencer leader", func() bool {
		l, err := c.Leader(ctx)
		next = l.ID
		return err == nil && l.ID != leader.ID
	})
	c.WaitRestarted(leader.ID, old, 20*time.Second)
	reachesNew(m3, "after the leader's SIGKILL")
	t.Logf("member m3 went on after the leader failover to %s", next)

	pstop()
	if err := <-pdone; err != nil {
		t.Fatalf("producer: %v", err)
	}
	// The member drains to the high watermarks and commits them.
	var hws []int64
	waitFor("committed offsets to reach the high watermarks", func() bool {
		d := describe()
		hws = make([]int64, parts)
		ok := len(d.Partitions) == int(parts)
		for _, p := range d.Partitions {
			hws[p.Partition] = p.HighWatermark
			if p.Committed != p.HighWatermark {
				ok = false
			}
		}
		return ok
	})
	m3.kill()
	var printed []map[int32][]consumed
	for _, m := range members {
		printed = append(printed, perPartition(m.snapshot()))
		t.Logf("member %s printed %d records; %d retry messages on stderr", m.name, len(m.snapshot()), strings.Count(m.stderr.String(), "retrying"))
	}
	t.Logf("committed offsets = high watermarks %v", hws)

	// The log, read from node-2, against what the members printed.
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	pmu.Lock()
	defer pmu.Unlock()
	dups, total := int64(0), int64(0)
	for q := range parts {
		log := map[int64]string{}
		for off := int64(0); off < hws[q]; {
			res, err := clients[1].Fetch(rctx, ns, stream, q, off, 0, 0)
			if err != nil {
				if errors.Is(err, streamapi.ErrNetwork) && rctx.Err() == nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				t.Fatal(err)
			}
			for _, r := range res.Records {
				log[*r.Offset] = string(r.Value)
			}
			off = res.NextOffset
		}
		// Each member printed the partition's offsets contiguously from where it started
		// (0, or the offset committed when it took over), byte for byte as stored; the
		// last one up to the high watermark.
		for k, m := range members {
			rs := printed[k][q]
			if len(rs) == 0 || rs[0].Offset != starts[k][q] {
				t.Errorf("partition %d: member %s started at %v, want %d", q, m.name, firstOffset(rs), starts[k][q])
			}
			for i, r := range rs {
				if i > 0 && r.Offset != rs[i-1].Offset+1 {
					t.Errorf("partition %d: member %s printed offset %d after %d", q, m.name, r.Offset, rs[i-1].Offset)
				}
				if got, want := compactJSON(r.Value), compactJSON(json.RawMessage(log[r.Offset])); got != want {
					t.Errorf("partition %d offset %d: member %s printed %s, the log holds %s", q, r.Offset, m.name, got, want)
				}
			}
			if k+1 < len(members) && len(rs) > 0 {
				dups += rs[len(rs)-1].Offset + 1 - starts[k+1][q]
			}
			if k == len(members)-1 && (len(rs) == 0 || rs[len(rs)-1].Offset != hws[q]-1) {
				t.Errorf("partition %d: last member %s printed up to %v, the high watermark is %d", q, m.name, lastOffset(rs), hws[q])
			}
		}
		total += hws[q]
		for off := range acked[q] {
			if off >= hws[q] {
				t.Errorf("partition %d: acknowledged offset %d is beyond the high watermark %d", q, off, hws[q])
			}
		}
	}
	t.Logf("%d records in %d partitions (%d acknowledged, %d produce retries) all consumed in order with no gap; %d read twice (printed after a killed member's last commit); %s",
		total, parts, nAcked, retry, dups, time.Since(start).Round(time.Millisecond))
	if p := c.LogProblems(); len(p) > 0 {
		t.Fatalf("children logged races or crashes:\n%s", p)
	}
}

func perPartition(rs []consumed) map[int32][]consumed {
	out := map[int32][]consumed{}
	for _, r := range rs {
		out[r.Partition] = append(out[r.Partition], r)
	}
	return out
}

func lastOffsets(m map[int32][]consumed, parts int32) []any {
	var out []any
	for q := range parts {
		out = append(out, lastOffset(m[q]))
	}
	return out
}

func firstOffset(rs []consumed) any {
	if len(rs) == 0 {
		return "none"
	}
	return rs[0].Offset
}

func lastOffset(rs []consumed) any {
	if len(rs) == 0 {
		return "none"
	}
	return rs[len(rs)-1].Offset
}

func compactJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

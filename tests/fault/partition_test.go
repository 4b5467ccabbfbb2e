package fault

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/tests/cluster"
)

// hosts are network namespaces the test made, one per child, each with a veth into one
// bridge of the root namespace: a private subnet only this test uses.
type hosts struct {
	t      *testing.T
	bridge string
	ns, ip map[string]string // by child id
}

func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// buildHosts makes a namespace and an address for every child id, or skips the test
// where the kernel refuses; everything is removed when the test ends.
func buildHosts(t *testing.T, ids []string) *hosts {
	t.Helper()
	tag := fmt.Sprintf("%04x", rand.IntN(1<<16))
	subnet := fmt.Sprintf("10.213.%d", 1+rand.IntN(250))
	h := &hosts{t: t, bridge: "lfb" + tag, ns: map[string]string{}, ip: map[string]string{}}
	t.Cleanup(func() {
		for _, ns := range h.ns {
			exec.Command("ip", "netns", "del", ns).Run()
		}
		exec.Command("ip", "link", "del", h.bridge).Run()
	})
	steps := [][]string{
		{"ip", "link", "add", h.bridge, "type", "bridge"},
		{"ip", "addr", "add", subnet + ".1/24", "dev", h.bridge},
		{"ip", "link", "set", h.bridge, "up"},
	}
	for k, id := range ids {
		ns, ip := "lf"+tag+"-"+id, fmt.Sprintf("%s.%d", subnet, 10+k)
		h.ns[id], h.ip[id] = ns, ip
		host, peer := fmt.Sprintf("lh%s%d", tag, k), fmt.Sprintf("lp%s%d", tag, k)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
			[]string{"ip", "link", "set", peer, "netns", ns},
			[]string{"ip", "link", "set", host, "master", h.bridge},
			[]string{"ip", "link", "set", host, "up"},
			[]string{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", peer},
			[]string{"ip", "-n", ns, "link", "set", peer, "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			t.Skipf("cannot build network namespaces here (needs root and CAP_NET_ADMIN): %v", err)
		}
	}
	return h
}

// devArgs place every child on its host.
func (h *hosts) devArgs() []string {
	var out []string
	for id, ns := range h.ns {
		out = append(out, "--child-host", id+"="+h.ip[id], "--child-netns", id+"="+ns)
	}
	return out
}

// cut drops all traffic between the children a and those of b, both ways (blackhole
// routes in each namespace); the returned func heals it.
func (h *hosts) cut(a []string, b []string) func() {
	h.t.Helper()
	var undo [][]string
	for _, x := range a {
		for _, y := range b {
			for _, pair := range [][2]string{{x, y}, {y, x}} {
				ns, dst := h.ns[pair[0]], h.ip[pair[1]]+"/32"
				if err := run("ip", "-n", ns, "route", "add", "blackhole", dst); err != nil {
					h.t.Fatal(err)
				}
				undo = append(undo, []string{"ip", "-n", ns, "route", "del", "blackhole", dst})
			}
		}
	}
	return func() {
		for _, u := range undo {
			if err := run(u...); err != nil {
				h.t.Error(err)
			}
		}
	}
}

// TestPartitions cuts, under load, the sequencer leader off from its followers but not
// from the log nodes, and a log node off from every voter but not from clients; each
// partition lasts faultWindow, then heals. The group must elect a leader on the majority
// side (or keep serving), the cut-off node's requests must fail over to the other node,
// and the checker stay clean.
func TestPartitions(t *testing.T) {
	ids := []string{"seq-1", "seq-2", "seq-3", "node-1", "node-2"}
	for _, tc := range []string{"leader_from_followers", "node_from_sequencers"} {
		t.Run(tc, func(t *testing.T) {
			h := buildHosts(t, ids)
			e := start(t, 3, 2, "part", 4, cluster.Options{DevArgs: h.devArgs()})
			l := cluster.NewLedger()
			load := e.load(l)
			time.Sleep(2 * time.Second)
			leader := e.c.WaitLeader(10 * time.Second)
			var heal func()
			if tc == "leader_from_followers" {
				var followers []string
				for _, id := range ids[:3] {
					if id != leader.ID {
						followers = append(followers, id)
					}
				}
				heal = h.cut([]string{leader.ID}, followers)
			} else {
				heal = h.cut([]string{"node-1"}, ids[:3])
			}
			from := time.Now()
			// Evidence the cut took: a new leader on the majority side, or node-1's
			// produces failing.
			fired := ""
			deadline := time.Now().Add(faultWindow() + 5*time.Second)
			for fired == "" && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				if tc == "leader_from_followers" {
					if nl, err := e.c.Leader(t.Context()); err == nil && nl.ID != leader.ID {
						fired = "new leader " + nl.ID + " (was " + leader.ID + ")"
					}
				} else {
					for _, r := range l.Requests() {
						if !r.OK && r.Node == e.c.NodeURLs()[0] && r.Sent.After(from) {
							fired = "node-1 produce failed: " + r.Kind
							break
						}
					}
				}
			}
			time.Sleep(time.Until(from.Add(faultWindow())))
			during := countOutcomes(l, from, time.Now())
			heal()
			end := time.Now()
			rec := recovery(t, l, end, 30*time.Second)
			time.Sleep(2 * time.Second)
			rep := e.finish(load, l)
			t.Logf("FIGURE partition=%s: %s; during: %s; recovery %s after healing; lost: none (%d acknowledged attempts all present)",
				tc, fired, during, rec.Round(time.Millisecond), rep.Acked)
			if fired == "" {
				t.Fatalf("no sign of the partition within %s", faultWindow()+5*time.Second)
			}
			if during.Acked*2 < during.total() {
				t.Fatalf("%s acknowledged during the partition, want at least half", during)
			}
		})
	}
}

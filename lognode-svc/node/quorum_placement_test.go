package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// registryNodes lists the registry's live nodes for the placement controller.
func registryNodes(reg *coord.Registry) server.NodeLister {
	return func(ctx context.Context) ([]server.LiveNode, error) {
		ns, err := reg.Live(ctx, "")
		out := make([]server.LiveNode, len(ns))
		for i, n := range ns {
			out[i] = server.LiveNode{ID: n.ID, Zone: n.Zone, JournalAddr: n.JournalAddr}
		}
		return out, err
	}
}

type placedCluster struct {
	t      *testing.T
	mc     meta.Client
	reg    *coord.Registry
	bucket objstore.Bucket
	dir    string
	nodes  map[string]*node.Node
	urls   map[string]string
}

// startPlaced starts a log node in placement mode (no static voters) in zone.
func (c *placedCluster) startPlaced(id, zone string, tune ...func(*node.QuorumConfig)) {
	c.t.Helper()
	qc := node.QuorumConfig{Addr: freeAddr(c.t), Dir: filepath.Join(c.dir, id), NoSync: true}
	for _, f := range tune {
		f(&qc)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: id, Zone: zone, HTTPAddr: "127.0.0.1:0", Bucket: c.bucket, Meta: c.mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet(), Registry: c.reg, HeartbeatTTL: time.Second, Quorum: qc})
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id], c.urls[id] = n, "http://"+n.Addr()
	c.t.Cleanup(func() { closeNode(c.nodes[id]) })
}

func (c *placedCluster) stop(id string) {
	closeNode(c.nodes[id])
	c.nodes[id] = nil
}

// waitJournal waits until the metastore holds exactly one journal and ok accepts it.
func (c *placedCluster) waitJournal(what string, ok func(meta.Journal) bool) meta.Journal {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.mc.ListJournals(context.Background())
		if err == nil && len(p.Journals) == 1 && ok(p.Journals[0]) {
			return p.Journals[0]
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: journals %+v (%v)", what, p.Journals, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func memberNodes(j meta.Journal) []string {
	var out []string
	for _, m := range j.Members {
		out = append(out, m.Node)
	}
	slices.Sort(out)
	return out
}

// TestQuorumPlacementCreatesAndReplaces: three log nodes in placement mode register with
// their journal listeners; the sequencer's controller makes a journal of them in three
// zones, a quorum stream is placed in it and takes produces through every node. One member
// is stopped for good: the controller replaces it by a fourth node, whose member catches
// up with everything acknowledged, and the journal's Raft membership follows (a second
// member stopped afterwards leaves a majority of the new membership).
func TestQuorumPlacementCreatesAndReplaces(t *testing.T) {
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := &coord.Registry{Store: store}
	mc := servertest.Client(t, func(c *server.Config) {
		c.Placement = server.PlacementConfig{Nodes: registryNodes(reg), ReplaceAfter: 2 * time.Second, Interval: 100 * time.Millisecond}
	})
	c := &placedCluster{t: t, mc: mc, reg: reg, bucket: objstore.NewMem(), dir: t.TempDir(), nodes: map[string]*node.Node{}, urls: map[string]string{}}
	for i, zone := range []string{"az-a", "az-b", "az-c"} {
		c.startPlaced(fmt.Sprintf("p-%d", i), zone)
	}
	j := c.waitJournal("journal of three", func(j meta.Journal) bool { return len(j.Members) == 3 })
	zones := map[string]bool{}
	for _, m := range j.Members {
		zones[m.Zone] = true
	}
	if j.Epoch != 1 || len(zones) != 3 || !slices.Equal(memberNodes(j), []string{"p-0", "p-1", "p-2"}) {
		t.Fatalf("created journal %+v: want p-0..p-2 in three zones at epoch 1", j)
	}
	if a := do(t, "POST", c.urls["p-0"]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	p, err := mc.ListJournals(context.Background())
	if err != nil || len(p.Assignments) != 1 || p.Assignments[0].Journal != j.ID {
		t.Fatalf("the stream's placement: %+v %v", p.Assignments, err)
	}

	var mu sync.Mutex
	acked := map[int64]string{} // offset -> value
	// produce sends one record through node id and records its acknowledged offset (safe
	// from any goroutine: it reports instead of failing the test).
	produce := func(id, v string) error {
		body, _ := json.Marshal(map[string]any{"records": []map[string]string{{"value": v}}})
		resp, err := http.Post(c.urls[id]+"/v1/namespaces/default/streams/q/records", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var pa produceAnswer
		if resp.StatusCode != 200 || json.Unmarshal(b, &pa) != nil || len(pa.Offsets) != 1 {
			return fmt.Errorf("produce %s through %s: %d %s", v, id, resp.StatusCode, b)
		}
		mu.Lock()
		defer mu.Unlock()
		if old, dup := acked[pa.Offsets[0].Offset]; dup {
			return fmt.Errorf("offset %d acknowledged twice (%s, %s)", pa.Offsets[0].Offset, old, v)
		}
		acked[pa.Offsets[0].Offset] = `"` + v + `"`
		return nil
	}
	for i := 0; i < 30; i++ {
		if err := produce(fmt.Sprintf("p-%d", i%3), fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A fourth node: a spare (three free nodes are needed for another journal).
	c.startPlaced("p-3", "az-a")
	time.Sleep(500 * time.Millisecond)
	if p, _ := mc.ListJournals(context.Background()); len(p.Journals) != 1 {
		t.Fatalf("a journal was made with a spare: %+v", p.Journals)
	}
	// p-1 is lost for good; produces go on through the two others meanwhile.
	c.stop("p-1")
	lost := time.Now()
	stopProducing := make(chan struct{})
	var wg sync.WaitGroup
	var during error
	produced := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; during == nil; i++ {
			select {
			case <-stopProducing:
				return
			default:
			}
			if during = produce([]string{"p-0", "p-2"}[i%2], fmt.Sprint("during-", i)); during == nil {
				produced++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	j = c.waitJournal("p-1 replaced", func(j meta.Journal) bool {
		return slices.Equal(memberNodes(j), []string{"p-0", "p-2", "p-3"})
	})
	replaced := time.Since(lost)
	time.Sleep(300 * time.Millisecond) // a few produces after the change
	close(stopProducing)
	wg.Wait()
	if during != nil || produced == 0 {
		t.Fatalf("produces while p-1 was lost and replaced: %d, then %v", produced, during)
	}
	t.Logf("%d produces while p-1 was lost and replaced; journal %s now %v at epoch %d", produced, j.ID, memberNodes(j), j.Epoch)
	if j.Epoch != 2 || j.Members[1].Node != "p-3" || j.Members[1].Zone != "az-a" {
		t.Fatalf("after the replacement: %+v, want p-3 in p-1's place at epoch 2", j)
	}
	// The new member catches up with everything acknowledged: a produce through p-3 and a
	// fetch there with its token.
	pa := produceQ(t, c.urls["p-3"], `{"records":[{"value":"after"}]}`)
	acked[pa.Offsets[0].Offset] = `"after"`
	check := func(id string) {
		t.Helper()
		got := map[int64]string{}
		var next, hwm int64
		for first := true; first || next < hwm; first = false {
			f := fetchQ(t, c.urls[id], fmt.Sprintf("offset=%d&max_bytes=67108864&token=%s", next, pa.Token))
			for _, r := range f.Records {
				if r.Offset != next {
					t.Fatalf("%s: record at offset %d, want %d: offsets not dense", id, r.Offset, next)
				}
				got[r.Offset] = string(r.Value)
				next++
			}
			hwm = f.HighWatermark
			if len(f.Records) == 0 {
				break
			}
		}
		for off, v := range acked {
			if got[off] != v {
				t.Fatalf("%s: acknowledged %s at offset %d, fetched %q (%d records, hwm %d)", id, v, off, got[off], len(got), hwm)
			}
		}
		if int64(len(got)) != hwm || len(got) != len(acked) {
			t.Fatalf("%s: %d records, hwm %d, %d acknowledged", id, len(got), hwm, len(acked))
		}
	}
	check("p-3")
	t.Logf("p-1 replaced in the metastore %v after it stopped (ReplaceAfter 2 s), p-3 served all %d acknowledged records %v after",
		replaced.Round(time.Millisecond), len(acked), time.Since(lost).Round(time.Millisecond))
	check("p-0")
	// The Raft membership followed the metastore's: with p-2 gone too, p-0 and p-3 are a
	// majority of {p-0, p-2, p-3} (they would not be of {p-0, p-1, p-2}).
	c.stop("p-2")
	pa = produceQ(t, c.urls["p-0"], `{"records":[{"value":"last"}]}`)
	acked[pa.Offsets[0].Offset] = `"last"`
	check("p-3")
	if !strings.HasPrefix(j.ID, "j") {
		t.Fatalf("journal id %q", j.ID)
	}
}

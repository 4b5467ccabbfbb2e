package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// TestQuorumPartitionMove: six log nodes in placement mode make two journals; a quorum
// stream's partition is moved from one to the other while two producers write through
// every node and an idempotent producer has written before the move. The move completes
// in the metastore (owner flipped, no move left); no produce failed; the partition's
// offsets are dense from 0 across the offloaded segments and the new journal, holding
// every acknowledged record once at its offset; a retry of the idempotent producer's
// last chunk from before the move is answered with its original offset by the new
// journal, and its next chunk follows.
func TestQuorumPartitionMove(t *testing.T) {
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := &coord.Registry{Store: store}
	mc := servertest.Client(t, func(c *server.Config) {
		c.Placement = server.PlacementConfig{Nodes: registryNodes(reg), ReplaceAfter: time.Hour, Interval: 100 * time.Millisecond}
	})
	bucket, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &placedCluster{t: t, mc: mc, reg: reg, bucket: bucket, dir: t.TempDir(), nodes: map[string]*node.Node{}, urls: map[string]string{}}
	ids := []string{"m-0", "m-1", "m-2", "m-3", "m-4", "m-5"}
	for i, id := range ids {
		c.startPlaced(id, []string{"az-a", "az-b", "az-c"}[i%3], func(q *node.QuorumConfig) {
			q.OffloadBytes, q.OffloadAge, q.Offload = 1<<20, time.Hour, journal.OffloadConfig{Interval: 50 * time.Millisecond}
		})
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := mc.ListJournals(ctx)
		if err == nil && len(p.Journals) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two journals: %+v %v", p.Journals, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := do(t, "POST", c.urls["m-0"]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	st, _, err := mc.GetStream(ctx, meta.DefaultNS, "q")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := mc.ListJournals(ctx)
	from := p.Assignments[0].Journal
	to := p.Journals[0].ID
	if to == from {
		to = p.Journals[1].ID
	}

	var mu sync.Mutex
	acked := map[int64]string{}
	post := func(id, body string) (produceAnswer, int, string) {
		resp, err := http.Post(c.urls[id]+"/v1/namespaces/default/streams/q/records", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			return produceAnswer{}, 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var pa produceAnswer
		_ = json.Unmarshal(b, &pa)
		return pa, resp.StatusCode, string(b)
	}
	record := func(off int64, v string) error {
		mu.Lock()
		defer mu.Unlock()
		if old, dup := acked[off]; dup {
			return fmt.Errorf("offset %d acknowledged twice (%s, %s)", off, old, v)
		}
		acked[off] = `"` + v + `"`
		return nil
	}
	// The idempotent producer writes before the move.
	a := do(t, "POST", c.urls["m-1"]+"/v1/namespaces/default/producers", "application/json", `{}`, "")
	var prod struct {
		ID    int64 `json:"producer_id"`
		Epoch int16 `json:"epoch"`
	}
	if a.status != 200 || json.Unmarshal([]byte(a.body), &prod) != nil {
		t.Fatalf("producer: %d %s", a.status, a.body)
	}
	idem := func(seq int) string {
		return fmt.Sprintf(`{"producer_id":%d,"epoch":%d,"sequences":{"0":%d},"records":[{"partition":0,"value":"idem-%d"}]}`, prod.ID, prod.Epoch, seq, seq)
	}
	var lastBody string
	var lastOff int64
	for seq := 0; seq < 20; seq++ {
		pa, code, body := post(ids[seq%6], idem(seq))
		if code != 200 || len(pa.Offsets) != 1 {
			t.Fatalf("idempotent produce %d: %d %s", seq, code, body)
		}
		if err := record(pa.Offsets[0].Offset, fmt.Sprint("idem-", seq)); err != nil {
			t.Fatal(err)
		}
		lastBody, lastOff = idem(seq), pa.Offsets[0].Offset
	}
	// Two producers write through every node across the move.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	counts := make([]int, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				pa, code, body := post(ids[(i+w)%6], fmt.Sprintf(`{"records":[{"value":%q}]}`, v))
				if code != 200 || len(pa.Offsets) != 1 {
					errs[w] = fmt.Errorf("produce %s: %d %s", v, code, body)
					return
				}
				if errs[w] = record(pa.Offsets[0].Offset, v); errs[w] != nil {
					return
				}
				counts[w]++
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	asked := time.Now()
	if err := mc.AssignJournalPartitions(ctx, st.ID, []int32{0}, to); err != nil {
		t.Fatal(err)
	}
	var moved time.Duration
	for {
		p, err := mc.ListJournals(ctx)
		if err == nil && len(p.Moves) == 0 && p.Assignments[0].Journal == to {
			moved = time.Since(asked)
			break
		}
		if time.Since(asked) > 30*time.Second {
			t.Fatalf("the move did not complete: %+v %v", p, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // produces on the new journal
	close(stop)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("produces %v", counts)
	}
	_, ps, err := mc.Lookup(ctx, st.ID, 0, 0, 0)
	if err != nil || ps.HighWatermark <= lastOff {
		t.Fatalf("the offset index after the move: %+v %v", ps, err)
	}
	t.Logf("moved %s -> %s in %v under %d produces; the index covers [0, %d)", from, to, moved.Round(time.Millisecond), counts[0]+counts[1], ps.HighWatermark)

	// The idempotent producer's last chunk from before the move, retried: its offset.
	pa, code, body := post("m-4", lastBody)
	if code != 200 || len(pa.Offsets) != 1 || pa.Offsets[0].Offset != lastOff {
		t.Fatalf("retry across the move: %d %s, want offset %d", code, body, lastOff)
	}
	pa, code, body = post("m-2", idem(20))
	if code != 200 || len(pa.Offsets) != 1 {
		t.Fatalf("the next idempotent chunk: %d %s", code, body)
	}
	if err := record(pa.Offsets[0].Offset, "idem-20"); err != nil {
		t.Fatal(err)
	}
	if pa, code, body = post("m-0", idem(22)); code == 200 {
		t.Fatalf("a sequence gap after the move was taken: %s", body)
	}
	// Every node reads the partition densely from 0: segments, then the new journal.
	for _, id := range []string{"m-0", "m-3", "m-5"} {
		got := map[int64]string{}
		var next, hwm int64
		for first := true; first || next < hwm; first = false {
			f := fetchQ(t, c.urls[id], fmt.Sprintf("offset=%d&max_bytes=1048576", next))
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
}

package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/testserver"
)

// zoneLedger is what the producers were told: acknowledged ids by partition and offset,
// and ids whose request failed (absent or present once).
type zoneLedger struct {
	mu    sync.Mutex
	acked map[string]streamapi.RecordOffset
	maybe map[string]bool
	n     atomic.Int64
}

// TestExpressZonesVersityGW: three versitygw servers are the zonal buckets. With the
// node's own zone's server SIGKILLed mid-load, produce goes on and every acknowledged
// record reads back from the producing node and from a cold one; with a second server
// killed, produce answers a retriable error and acknowledges nothing.
func TestExpressZonesVersityGW(t *testing.T) {
	ctx := context.Background()
	var servers [3]*testserver.VersityGW
	var zones []objstore.Zone
	for i := range servers {
		servers[i] = testserver.StartVersityGWKillable(t)
		b, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: "express", Endpoint: servers[i].URL, Region: servers[i].Region,
			AccessKey: servers[i].AccessKey, SecretKey: servers[i].SecretKey, PathStyle: true, CreateBucket: true})
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, objstore.Zone{Name: fmt.Sprintf("zone-%c", 'a'+i), Bucket: b})
	}
	exp, err := objstore.NewExpress(objstore.ExpressConfig{Zones: zones, Local: "zone-b", StragglerTimeout: 5 * time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m := startSequencer(t)
	std := objstore.NewMem()
	lim := httpapi.Limits{ProduceWait: 3 * time.Second}
	start := func(id string) *node.Node {
		n, err := node.Start(ctx, node.Config{NodeID: id, Zone: "zone-b", HTTPAddr: "127.0.0.1:0", Bucket: std, Meta: m,
			ExpressBucket: exp, Limits: lim, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		return n
	}
	n := start("n-1")
	if code, body := post(t, n.URL()+"/v1/namespaces/default/streams", `{"name":"x","class":"express","partitions":4}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	lg := &zoneLedger{acked: map[string]streamapi.RecordOffset{}, maybe: map[string]bool{}}
	produce := func(id string, p int32) (int, error) {
		body := fmt.Sprintf(`{"records":[{"value":{"id":%q},"partition":%d}]}`, id, p)
		resp, err := http.Post(n.URL()+"/v1/namespaces/default/streams/x/records", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			lg.mu.Lock()
			lg.maybe[id] = true
			lg.mu.Unlock()
			return 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		lg.mu.Lock()
		defer lg.mu.Unlock()
		if resp.StatusCode != 200 {
			lg.maybe[id] = true
			return resp.StatusCode, fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		var pr streamapi.ProduceResponse
		if err := json.Unmarshal(b, &pr); err != nil || len(pr.Offsets) != 1 {
			t.Errorf("produce answer %s: %v", b, err)
			return resp.StatusCode, err
		}
		lg.acked[id] = pr.Offsets[0]
		lg.n.Add(1)
		return 200, nil
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := produce(fmt.Sprintf("c%d-%d", c, i), int32(c)); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	before := lg.n.Load()
	servers[1].Kill() // the node's own zone
	time.Sleep(2 * time.Second)
	during := lg.n.Load() - before
	close(stop)
	wg.Wait()
	t.Logf("FIGURE express_zone_down: %d produces acknowledged before, %d in the 2 s after zone-b's server was SIGKILLed, %d failed", before, during, failed.Load())
	if before == 0 || during == 0 {
		t.Fatalf("acknowledged %d before and %d after one zone died: produce must go on", before, during)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d produces failed with one zone down", failed.Load())
	}
	// Every acknowledged record reads back, from the producing node and from a cold one
	// (no tail cache: it reads zones a and c, its own being down).
	check := func(url string) {
		got := map[string]int64{}
		for p := range int32(4) {
			for off := int64(0); ; {
				resp, err := http.Get(fmt.Sprintf("%s/v1/namespaces/default/streams/x/partitions/%d/records?offset=%d", url, p, off))
				if err != nil {
					t.Fatal(err)
				}
				var fr streamapi.FetchResponse
				err = json.NewDecoder(resp.Body).Decode(&fr)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("fetch %s partition %d at %d: %d %v", url, p, off, resp.StatusCode, err)
				}
				for _, r := range fr.Records {
					var v struct{ ID string }
					json.Unmarshal(r.Value, &v)
					got[v.ID] = *r.Offset
				}
				if fr.NextOffset >= fr.HighWatermark {
					break
				}
				off = fr.NextOffset
			}
		}
		for id, ack := range lg.acked {
			if off, ok := got[id]; !ok || off != ack.Offset {
				t.Fatalf("%s: acknowledged %s at %d: read at %d (present %v)", url, id, ack.Offset, off, ok)
			}
		}
	}
	check(n.URL())
	cold := start("n-2")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) { // the cold node follows the sequencer's watch
		resp, err := http.Get(cold.URL() + "/v1/namespaces/default/streams/x/partitions/0/records?offset=0")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(cold.URL())
	// Two zones down: nothing can be acknowledged.
	servers[2].Kill()
	acked := lg.n.Load()
	for i := range 3 {
		t0 := time.Now()
		code, err := produce(fmt.Sprintf("two-down-%d", i), 0)
		if err == nil {
			t.Fatalf("produce acknowledged with two of three zones down")
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("produce with two zones down: %v, want 503 (retriable)", err)
		}
		t.Logf("two zones down: %v after %v", err, time.Since(t0).Round(time.Millisecond))
	}
	if lg.n.Load() != acked {
		t.Fatal("acknowledged with two zones down")
	}
	check(n.URL()) // acknowledged data is still there, read from zone a
}

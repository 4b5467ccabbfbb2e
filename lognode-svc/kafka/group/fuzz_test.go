package group

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// FuzzHandle feeds arbitrary request bodies of every served API key and version through
// the coordinator (one coordinator for the whole run, so state builds up): no panic, and
// every request that decodes gets a response of its own key and version.
func FuzzHandle(f *testing.F) {
	c, _ := newCoordF(f)
	keys := make([]int16, 0, len(c.Versions()))
	for k := range c.Versions() {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	seed := func(r kmsg.Request) { f.Add(uint8(r.Key()), uint8(r.GetVersion()), r.AppendTo(nil)) }
	seed(joinReq("g", "", time.Second, nil, "orders"))
	seed(syncReq("g", "m", 1, map[string][]byte{"m": {0, 1}}))
	seed(hbReq("g", "m", 1))
	seed(commitReq("g", "", -1, "orders", map[int32]int64{0: 1, 1: 2}))
	seed(cghb("g", "m1", 0, []string{"orders"}, map[[16]byte][]int32{}))
	f.Fuzz(func(t *testing.T, key, version uint8, body []byte) {
		k := keys[int(key)%len(keys)]
		v := c.Versions()[k]
		req := kmsg.RequestForKey(k)
		req.SetVersion(v[0] + int16(version)%(v[1]-v[0]+1))
		if err := req.ReadFrom(body); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		resp, err := c.Handle(ctx, meta.DefaultNS, req)
		if err != nil {
			t.Fatalf("key %d v%d: %v", k, req.GetVersion(), err)
		}
		if resp.Key() != k || resp.GetVersion() != req.GetVersion() {
			t.Fatalf("key %d v%d answered key %d v%d", k, req.GetVersion(), resp.Key(), resp.GetVersion())
		}
		resp.AppendTo(nil)
	})
}

package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// freeRun finds n consecutive free ports on 127.0.0.1.
func freeRun(t *testing.T, n int) int {
	t.Helper()
	for base := 41000; base < 60000; base += 97 {
		ok := true
		for i := range n {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port run")
	return 0
}

// grpcLoad produces through each log node's gRPC API (loam.v1) records whose values name
// unique ids, never retried, and remembers each answer: acknowledged at an offset,
// refused, or unknown.
type grpcLoad struct {
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	acked   map[string][2]int64 // id → partition, offset
	refused map[string]bool
	sent    map[string]bool
	unknown int
	parts   int32
}

func startGRPCLoad(t *testing.T, addrs []string, stream string, parts int32) *grpcLoad {
	t.Helper()
	g := &grpcLoad{stopc: make(chan struct{}), acked: map[string][2]int64{}, refused: map[string]bool{}, sent: map[string]bool{}, parts: parts}
	for i, addr := range addrs {
		c, err := streamapi.DialGRPC(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-g.stopc:
					return
				default:
				}
				recs := make([]streamapi.Record, 5)
				ids := make([]string, len(recs))
				for j := range recs {
					ids[j] = fmt.Sprintf("g%d-%d-%d", i, n, j)
					v, _ := json.Marshal(ids[j])
					recs[j] = streamapi.Record{Partition: ptr(int32(j) % parts), Value: v}
				}
				g.mu.Lock()
				for _, id := range ids {
					g.sent[id] = true
				}
				g.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				res, err := c.Produce(ctx, ns, stream, recs)
				cancel()
				g.mu.Lock()
				var ae *streamapi.APIError
				switch {
				case err == nil && len(res.Offsets) == len(ids):
					for j, id := range ids {
						if o := res.Offsets[j]; o.Error == nil {
							g.acked[id] = [2]int64{int64(o.Partition), o.Offset}
						} else {
							g.refused[id] = true
						}
					}
				case err != nil && errors.As(err, &ae) && (ae.Detail.Code == streamapi.CodeCommitFailed || (ae.Status >= 400 && ae.Status < 500)):
					for _, id := range ids {
						g.refused[id] = true
					}
				default:
					g.unknown++
				}
				g.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return g
}

// stop stops the writers and checks the stream: acknowledged once at its offset, refused
// absent, nothing twice (no retries), nothing never sent.
func (g *grpcLoad) stop(t *testing.T, e *env, stream string) string {
	t.Helper()
	close(g.stopc)
	g.wg.Wait()
	at := map[string][]int64{}
	where := map[string][2]int64{}
	cl := e.c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for q := range g.parts {
		var next int64
		for {
			resp, err := cl.Fetch(ctx, ns, stream, q, next, 4<<20, 0)
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("read %s partition %d: %v", stream, q, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for _, r := range resp.Records {
				var id string
				if err := json.Unmarshal(r.Value, &id); err != nil {
					t.Fatalf("%s partition %d offset %d: %v", stream, q, next, err)
				}
				at[id] = append(at[id], next)
				where[id] = [2]int64{int64(q), next}
				next++
			}
			if next >= resp.HighWatermark {
				break
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var bad []string
	for id, offs := range at {
		switch {
		case len(offs) > 1:
			bad = append(bad, fmt.Sprintf("%s present %d times", id, len(offs)))
		case !g.sent[id]:
			bad = append(bad, id+" never sent")
		case g.refused[id]:
			bad = append(bad, id+" present although refused")
		}
	}
	for id, w := range g.acked {
		if len(at[id]) != 1 || where[id] != w {
			bad = append(bad, fmt.Sprintf("acknowledged %s at %v: present at %v", id, w, at[id]))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("gRPC stream %s: %d violations:\n%s", stream, len(bad), strings.Join(bad[:min(len(bad), 30)], "\n"))
	}
	return fmt.Sprintf("%d records sent, %d acknowledged (all present once at their offset), %d refused (all absent), %d requests unknown, %d records in the stream (none twice)",
		len(g.sent), len(g.acked), len(g.refused), g.unknown, len(at))
}

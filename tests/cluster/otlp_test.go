package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// rrProxy is a round-robin TCP load balancer on loopback: each connection goes to the
// next backend, skipping one that refuses the dial, as a load balancer with a connect
// check does.
type rrProxy struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
	per      []atomic.Int64 // connections sent to each backend
	lost     atomic.Int64   // connections no backend took
	lastErr  atomic.Value   // the last dial error of such a connection
}

func startProxy(t *testing.T, backends []string) *rrProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rrProxy{ln: ln, backends: backends, conns: map[net.Conn]bool{}, per: make([]atomic.Int64, len(backends))}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *rrProxy) addr() string { return p.ln.Addr().String() }

func (p *rrProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(c)
		}()
	}
}

func (p *rrProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *rrProxy) pipe(c net.Conn) {
	defer c.Close()
	var up net.Conn
	first := int(p.next.Add(1))
	for k := range len(p.backends) {
		i := (first + k) % len(p.backends) // the next one, then the others in turn
		d, err := net.DialTimeout("tcp", p.backends[i], time.Second)
		if err == nil {
			up = d
			p.per[i].Add(1)
			break
		}
		p.lastErr.Store(err.Error())
	}
	if up == nil {
		p.lost.Add(1)
		return // every backend is down: the client sees the connection close
	}
	defer up.Close()
	p.track(c, true)
	p.track(up, true)
	defer p.track(c, false)
	defer p.track(up, false)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, up); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

func (p *rrProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// otlpCapture keeps what the SDK emits, so the test calls Export directly.
type otlpCapture struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

func (c *otlpCapture) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *otlpCapture) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *otlpCapture) Shutdown(context.Context) error                         { return nil }
func (c *otlpCapture) ForceFlush(context.Context) error                       { return nil }

// TestOTLPBehindLoadBalancer: OTLP exporters (HTTP and gRPC, calling Export directly)
// write steadily through a round-robin TCP proxy in front of two log nodes; one node is
// SIGKILLed mid-run and kept down. Every log of every Export that returned nil is read
// back at least once.
func TestOTLPBehindLoadBalancer(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster")
	}
	otlpHTTP, otlpGRPC := freePortRanges(t, 2, 2)
	c := Start(t, bins, Options{Sequencers: 1, Nodes: 2, FlushInterval: 20 * time.Millisecond,
		DevArgs: []string{"--otlp-http-port", strconv.Itoa(otlpHTTP), "--otlp-grpc-port", strconv.Itoa(otlpGRPC)}})
	hp := startProxy(t, []string{"127.0.0.1:" + strconv.Itoa(otlpHTTP), "127.0.0.1:" + strconv.Itoa(otlpHTTP+1)})
	gp := startProxy(t, []string{"127.0.0.1:" + strconv.Itoa(otlpGRPC), "127.0.0.1:" + strconv.Itoa(otlpGRPC+1)})

	res, err := resource.New(context.Background(), resource.WithAttributes(attribute.String("service.name", "lb-test")))
	if err != nil {
		t.Fatal(err)
	}
	capt := &otlpCapture{}
	lg := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(capt)).Logger("lb-test")
	batch := func(prefix string, n int) []sdklog.Record {
		capt.mu.Lock()
		capt.recs = nil
		capt.mu.Unlock()
		for i := range n {
			var r otellog.Record
			r.SetBody(attribute.StringValue(fmt.Sprintf("%s/%d", prefix, i)))
			r.SetTimestamp(time.Now())
			lg.Emit(context.Background(), r)
		}
		capt.mu.Lock()
		defer capt.mu.Unlock()
		return capt.recs
	}
	var batchMu sync.Mutex // the capture is shared

	type exporter interface {
		Export(context.Context, []sdklog.Record) error
		Shutdown(context.Context) error
	}
	retry := 5 * time.Second
	var exporters []exporter
	for range 2 {
		// No keep-alive: each request is its own connection, spread round-robin.
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		ex, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpoint(hp.addr()), otlploghttp.WithInsecure(), otlploghttp.WithHTTPClient(hc),
			otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: retry}))
		if err != nil {
			t.Fatal(err)
		}
		exporters = append(exporters, ex)
		gx, err := otlploggrpc.New(context.Background(), otlploggrpc.WithEndpoint(gp.addr()), otlploggrpc.WithInsecure(), otlploggrpc.WithCompressor("gzip"),
			otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: retry}))
		if err != nil {
			t.Fatal(err)
		}
		exporters = append(exporters, gx)
	}
	defer func() {
		for _, ex := range exporters {
			ex.Shutdown(context.Background())
		}
	}()

	var (
		mu                  sync.Mutex
		acked               = map[string]bool{}
		ok, failed, okAfter atomic.Int64
		killed              atomic.Bool
		stop                = make(chan struct{})
		wg                  sync.WaitGroup
	)
	const per = 20
	t0 := time.Now()
	for w, ex := range exporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				prefix := fmt.Sprintf("w%d-%d", w, i)
				batchMu.Lock()
				recs := batch(prefix, per)
				batchMu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				err := ex.Export(ctx, recs)
				cancel()
				if err != nil {
					if n := failed.Add(1); n <= 3 || n%20 == 0 {
						t.Logf("export %s failed %v after the start (its logs may or may not be written): %v", prefix, time.Since(t0).Round(time.Millisecond), err)
					}
					continue
				}
				ok.Add(1)
				if killed.Load() {
					okAfter.Add(1)
				}
				mu.Lock()
				for j := range per {
					acked[fmt.Sprintf("%s/%d", prefix, j)] = true
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second)
	before := ok.Load()
	c.Hold("node-1")
	c.Kill("node-1")
	killed.Store(true)
	t.Logf("node-1 killed %v after the start", time.Since(t0).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("exports acknowledged: %d before the kill, %d after; %d failed; proxy connections HTTP %d/%d gRPC %d/%d; HTTP connections no backend took: %d (%v)",
		before, okAfter.Load(), failed.Load(), hp.per[0].Load(), hp.per[1].Load(), gp.per[0].Load(), gp.per[1].Load(), hp.lost.Load(), hp.lastErr.Load())
	if before == 0 || okAfter.Load() == 0 {
		t.Fatalf("exports acknowledged: %d before the kill, %d after: want both", before, okAfter.Load())
	}
	// Only an export in flight on the killed node may fail (the HTTP exporter does not retry
	// a broken connection): a request or two per exporter around the kill, and no
	// connection may find no node.
	if failed.Load() > int64(2*len(exporters)) || hp.lost.Load()+gp.lost.Load() > 0 {
		t.Errorf("%d exports failed, %d connections found no node: the live node should have taken all but those in flight at the kill", failed.Load(), hp.lost.Load()+gp.lost.Load())
	}
	if hp.per[0].Load() == 0 || hp.per[1].Load() == 0 {
		t.Errorf("the HTTP proxy used only one backend: %d/%d", hp.per[0].Load(), hp.per[1].Load())
	}

	// Read everything back through node-2's native fetch API.
	seen := map[string]int{}
	base := c.NodeURLs()[1]
	st, err := c.Client(1).GetStream(context.Background(), ns, "otel_logs")
	if err != nil {
		t.Fatal(err)
	}
	for p := range st.Partitions {
		for off := int64(0); ; {
			resp, err := http.Get(fmt.Sprintf("%s/v1/namespaces/%s/streams/otel_logs/partitions/%d/records?offset=%d&max_bytes=4194304", base, ns, p, off))
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Records []struct {
					Value struct {
						Body struct {
							StringValue string `json:"stringValue"`
						} `json:"body"`
					} `json:"value"`
				} `json:"records"`
				NextOffset int64 `json:"next_offset"`
				HighWater  int64 `json:"high_watermark"`
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("fetch partition %d at %d: %d %s", p, off, resp.StatusCode, b)
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			for _, r := range body.Records {
				seen[r.Value.Body.StringValue]++
			}
			off = body.NextOffset
			if off >= body.HighWater || len(body.Records) == 0 {
				break
			}
		}
	}
	lost, dup := 0, 0
	for k := range acked {
		switch n := seen[k]; {
		case n == 0:
			if lost < 5 {
				t.Errorf("acknowledged log %s is missing", k)
			}
			lost++
		case n > 1:
			dup++
		}
	}
	t.Logf("%d acknowledged logs, %d read back (%d records), %d lost, %d read more than once (at-least-once)", len(acked), len(seen), sumCounts(seen), lost, dup)
	if lost > 0 {
		t.Fatalf("%d acknowledged logs lost", lost)
	}
	c.Release("node-1")
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

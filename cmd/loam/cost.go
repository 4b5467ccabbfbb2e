package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/pricing"
	"github.com/loamhq/loam/shared/streamapi"
)

const costUsage = `usage: loam cost [--rates 10,100] [--measure 10s] [--measure-rate 8] [--retention-days 7] [--json]

Prints the monthly AWS bill of the example deployment (terraform/examples/complete) at each
produce rate (MiB/s), next to the same workload on three Kafka brokers with RF 3. The
request counts come from Loam's own counters: loam cost first runs an in-process cluster
(sequencer, log node, segmenter) on an in-memory bucket with S3 Standard's latency for
--measure at --measure-rate MiB/s and counts its S3 PUTs and GETs, WAL commits and
coordination-table requests. Prices are shared/pricing's AWS us-east-1 list prices (dated
there). docs/cost.md explains the model.
`

// costMeasureTarget is the segment size of the measuring run: small, so a short run makes
// segments; segment PUTs per GiB scale by its ratio to the deployment's target.
const costMeasureTarget = 1 << 20

func runCost(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("cost", g)
	rates := fs.String("rates", "10,100", "produce rates to bill, MiB/s, comma-separated")
	measure := fs.Duration("measure", 10*time.Second, "how long the measuring run produces")
	measureRate := fs.Float64("measure-rate", 8, "MiB/s the measuring run produces")
	retention := fs.Float64("retention-days", pricing.DefaultDeployment.RetentionDays, "days of data kept (S3 storage; Kafka's volumes)")
	asJSON := fs.Bool("json", false, "print the measured counts and bills as JSON")
	pos, err := parseArgs(fs, costUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos); err != nil {
		return err
	}
	var bill []float64
	for _, f := range strings.Split(*rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return usageError{fmt.Errorf("cost: --rates %q: want positive MiB/s, comma-separated", *rates)}
		}
		bill = append(bill, v)
	}
	if *measure < time.Second || *measureRate <= 0 {
		return usageError{fmt.Errorf("cost: --measure at least 1s and --measure-rate positive")}
	}
	fmt.Fprintf(stderr, "loam cost: measuring %v at %.0f MiB/s on an in-process cluster...\n", *measure, *measureRate)
	m, run, err := measureCost(ctx, *measure, *measureRate*(1<<20))
	if err != nil {
		return err
	}
	d := pricing.DefaultDeployment
	d.RetentionDays = *retention
	type rateBill struct {
		MiBps   float64
		Nodes   int
		Loam    []pricing.Line // the standard class
		Express []pricing.Line
		Kafka   []pricing.Line
	}
	var bills []rateBill
	for _, r := range bill {
		bps := r * (1 << 20)
		bills = append(bills, rateBill{r, d.Nodes(bps), pricing.LoamBill(m, d, bps), pricing.ClassBill(m, d, pricing.ExpressClass, bps), pricing.KafkaBill(d, bps)})
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"measured": m, "run": run, "deployment": d, "bills": bills, "prices_as_of": pricing.AsOf})
	}
	fmt.Fprintf(stdout, "Measured (%s):\n", run)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  WAL flushes per node-second\t%.2f\t(model: one per %.0f ms while data arrives, more past %.0f MiB buffered)\n",
		run.FlushesPerSecond, m.FlushInterval*1000, m.MaxBufferBytes/(1<<20))
	fmt.Fprintf(tw, "  S3 PUTs per WAL flush\t%.2f\n", m.PutsPerFlush)
	fmt.Fprintf(tw, "  CommitWal per WAL flush\t%.2f\n", m.CommitsPerFlush)
	fmt.Fprintf(tw, "  segmenter S3 GETs per WAL object\t%.2f\n", m.SegmenterGetsPerWAL)
	fmt.Fprintf(tw, "  segment PUTs per GiB\t%.1f\t(%.1f measured at a %d MiB target)\n", m.SegmentPutsPerGiB, run.SegmentPutsPerGiBMeasured, costMeasureTarget>>20)
	fmt.Fprintf(tw, "  coordination writes / reads per WAL object\t%.2f / %.2f\n", m.CoordWritesPerWAL, m.CoordReadsPerWAL)
	tw.Flush()
	for _, b := range bills {
		fmt.Fprintf(stdout, "\n%.0f MiB/s (%d log nodes), per month at AWS list prices of %s:\n", b.MiBps, b.Nodes, pricing.AsOf)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, sys := range []struct {
			name  string
			lines []pricing.Line
		}{{"Loam, standard class (S3 Standard, 250 ms flush)", b.Loam}, {"Loam, express class (3 × S3 Express One Zone, 5 ms flush)", b.Express}, {"Kafka, 3 brokers, RF 3", b.Kafka}} {
			fmt.Fprintf(tw, "  %s\t\t\n", sys.name)
			for _, l := range sys.lines {
				fmt.Fprintf(tw, "    %s\t%10.2f\t%s\n", l.Item, l.Monthly, l.Basis)
			}
			fmt.Fprintf(tw, "    total\t%10.2f\t\n", pricing.Total(sys.lines))
		}
		tw.Flush()
		fmt.Fprintf(stdout, "  Kafka / Loam standard: %.1f×; Kafka / Loam express: %.1f×\n",
			pricing.Total(b.Kafka)/pricing.Total(b.Loam), pricing.Total(b.Kafka)/pricing.Total(b.Express))
	}
	return nil
}

// costRun is what the measuring run saw.
type costRun struct {
	Seconds                   float64
	BytesProduced             int64
	WALPuts, Flushes          int64
	FlushesPerSecond          float64 // per node
	SegmentPutsPerGiBMeasured float64
}

func (r costRun) String() string {
	return fmt.Sprintf("%.0f s, %.1f MiB produced, %d WAL objects", r.Seconds, float64(r.BytesProduced)/(1<<20), r.WALPuts)
}

// measureCost runs the in-process cluster and derives pricing.Measured from its counters.
func measureCost(ctx context.Context, d time.Duration, bytesPerSecond float64) (pricing.Measured, costRun, error) {
	var m pricing.Measured
	var run costRun
	dir, err := os.MkdirTemp("", "loam-cost-")
	if err != nil {
		return m, run, err
	}
	defer os.RemoveAll(dir)
	bucket := newPrefixCounter(objstore.NewMem())
	var cc *coord.Counting
	addrs := make([]string, 2)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return m, run, err
		}
		addrs[i] = l.Addr().String()
		l.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return m, run, err
	}
	const flush = 250 * time.Millisecond
	c, err := devcluster.Start(ctx, devcluster.Config{DataDir: dir, Store: bucket, HTTPListener: ln,
		SequencerRPC: addrs[0], SequencerRaft: addrs[1], FlushInterval: flush, ObjstoreLatency: "s3-standard",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		WrapCoord: func(s coord.Store) coord.Store { cc = coord.NewCounting(s); return cc },
		Functions: devcluster.FunctionsConfig{SegmentTargetBytes: costMeasureTarget, SegmentMaxAge: time.Hour,
			GCGrace: time.Hour, SweepInterval: time.Hour, WatchInterval: 200 * time.Millisecond}})
	if err != nil {
		return m, run, err
	}
	defer c.Close(context.Background())
	cl, err := streamapi.NewClient("http://" + c.HTTPAddr())
	if err != nil {
		return m, run, err
	}
	const parts = 8
	if _, err := cl.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "cost", Partitions: ptrInt32(parts)}); err != nil {
		return m, run, err
	}
	w0, r0 := cc.Counts()
	start := time.Now()
	var produced atomic.Int64
	value, _ := json.Marshal(strings.Repeat("x", 1000))
	perTick := int(bytesPerSecond / 10 / float64(len(value)))
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	tick := time.NewTicker(100 * time.Millisecond)
	for time.Since(start) < d {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := make([]streamapi.Record, max(perTick, 1))
			for i := range recs {
				recs[i] = streamapi.Record{Value: value, Partition: ptrInt32(int32(i % parts))}
			}
			if _, err := cl.Produce(ctx, "default", "cost", recs); err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			produced.Add(int64(len(recs) * len(value)))
		}()
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return m, run, fmt.Errorf("cost: measuring run: %w", err)
	default:
	}
	// Let the segmenter catch up with every WAL object (it is notified within 200 ms): wait
	// until the bucket has seen no call for a second.
	for deadline, last := time.Now().Add(30*time.Second), int64(-1); time.Now().Before(deadline); {
		n := bucket.total()
		if n == last {
			break
		}
		last = n
		time.Sleep(time.Second)
	}
	walPuts := bucket.count("put", "wal/")
	w1, r1 := cc.Counts()
	flushes := walPuts // a committed flush is one WAL object; retries would show as more PUTs
	if v, ok := gatherCounter(c, "loam_wal_flushes_total"); ok {
		flushes = int64(v)
	}
	if flushes == 0 {
		return m, run, fmt.Errorf("cost: the measuring run flushed nothing")
	}
	gib := float64(produced.Load()) / (1 << 30)
	// Registry heartbeats (every third of the 10 s TTL) are billed per node-hour instead.
	heartbeats := elapsed / (10.0 / 3)
	run = costRun{Seconds: elapsed, BytesProduced: produced.Load(), WALPuts: walPuts, Flushes: flushes,
		FlushesPerSecond:          float64(flushes) / elapsed,
		SegmentPutsPerGiBMeasured: float64(bucket.count("put", "seg/")) / gib}
	m = pricing.Measured{
		FlushInterval:             flush.Seconds(),
		MaxBufferBytes:            8 << 20,
		PutsPerFlush:              float64(walPuts) / float64(flushes),
		CommitsPerFlush:           1,
		CommitBytes:               512,
		SegmenterGetsPerWAL:       float64(bucket.count("get", "wal/")) / float64(walPuts),
		SegmentTargetBytes:        128 << 20,
		SegmentPutsPerGiB:         run.SegmentPutsPerGiBMeasured * costMeasureTarget / (128 << 20),
		CoordWritesPerWAL:         max(0, float64(w1-w0)-heartbeats) / float64(walPuts),
		CoordReadsPerWAL:          float64(r1-r0) / float64(walPuts),
		RegistryWritesPerNodeHour: 3600 / (10.0 / 3),
	}
	return m, run, nil
}

// gatherCounter reads a counter family's total from the log node's metrics.
func gatherCounter(c *devcluster.Cluster, name string) (float64, bool) {
	mfs, err := c.Gatherer().Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			t := 0.0
			for _, m := range mf.GetMetric() {
				t += m.GetCounter().GetValue()
			}
			return t, true
		}
	}
	return 0, false
}

func ptrInt32(v int32) *int32 { return &v }

// prefixCounter counts a bucket's calls by kind and by key prefix (wal/, seg/, other).
type prefixCounter struct {
	objstore.Bucket
	mu sync.Mutex
	n  map[string]int64
}

func newPrefixCounter(b objstore.Bucket) *prefixCounter {
	return &prefixCounter{Bucket: b, n: map[string]int64{}}
}

func (p *prefixCounter) add(kind, key string) {
	prefix := "other"
	for _, pre := range []string{"wal/", "seg/"} {
		if strings.HasPrefix(key, pre) {
			prefix = pre
		}
	}
	p.mu.Lock()
	p.n[kind+" "+prefix]++
	p.mu.Unlock()
}

func (p *prefixCounter) total() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := int64(0)
	for _, n := range p.n {
		t += n
	}
	return t
}

func (p *prefixCounter) count(kind, prefix string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[kind+" "+prefix]
}

func (p *prefixCounter) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	p.add("put", key)
	return p.Bucket.Put(ctx, key, body, opts...)
}

func (p *prefixCounter) Get(ctx context.Context, key string) ([]byte, error) {
	p.add("get", key)
	return p.Bucket.Get(ctx, key)
}

func (p *prefixCounter) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p.add("get", key)
	return p.Bucket.GetRange(ctx, key, off, n)
}

package cluster

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// LoadConfig configures a load generator.
type LoadConfig struct {
	Nodes      []string // log nodes' base URLs (http://host:port)
	Namespace  string   // default "default"
	Stream     string
	Partitions int32
	Writers    int           // clients producing in a loop (4)
	PerRequest int           // records per request (25)
	Pad        int           // value padding bytes (64)
	Timeout    time.Duration // per request (15 s)
	// ProbeEvery, when > 0, also sends a one-record produce this often, each on its own,
	// so the timeline shows when produce works again after a failure even while the
	// writers wait on stalled requests.
	ProbeEvery time.Duration
	Tailers    bool // one long-polling reader per partition, checking order as it reads
}

// Load produces to and tails a stream through the log nodes, round-robin, moving to the
// next node after an error. A request that fails is retried (the same records as a new
// attempt) until it succeeds or the load stops.
type Load struct {
	cfg     LoadConfig
	ledger  *Ledger
	clients []*streamapi.Client
	stop    chan struct{}
	wg      sync.WaitGroup
	nextID  atomic.Int64
	rr      atomic.Uint64
	probes  chan struct{}
}

// StartLoad starts the writers, the prober and the tailers.
func StartLoad(cfg LoadConfig, ledger *Ledger) (*Load, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 4
	}
	if cfg.PerRequest <= 0 {
		cfg.PerRequest = 25
	}
	if cfg.Pad <= 0 {
		cfg.Pad = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if len(cfg.Nodes) == 0 || cfg.Partitions <= 0 || cfg.Stream == "" {
		return nil, errors.New("cluster: load needs nodes, a stream and partitions")
	}
	l := &Load{cfg: cfg, ledger: ledger, stop: make(chan struct{}), probes: make(chan struct{}, 64)}
	for _, n := range cfg.Nodes {
		// One transport per node, no keep-alive reuse across a node's restart surprises.
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
		c, err := streamapi.NewClient(n, streamapi.WithTimeout(cfg.Timeout), streamapi.WithHTTPClient(hc))
		if err != nil {
			return nil, err
		}
		l.clients = append(l.clients, c)
	}
	for w := range cfg.Writers {
		l.wg.Add(1)
		go l.writer(w)
	}
	if cfg.ProbeEvery > 0 {
		l.wg.Add(1)
		go l.prober()
	}
	if cfg.Tailers {
		for p := range cfg.Partitions {
			l.wg.Add(1)
			go l.tail(p)
		}
	}
	return l, nil
}

// Stop stops sending new requests and waits for those in flight to be answered (each is
// bounded by the request timeout) and for the tailers to end.
func (l *Load) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *Load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// produce sends recs (attempt keys keys) to the next node; it returns whether they were
// acknowledged and which node index it used.
func (l *Load) produce(node int, keys []AttemptKey, parts []int32, probe bool) bool {
	recs := make([]streamapi.Record, len(keys))
	values := make([][]byte, len(keys))
	for i, k := range keys {
		recs[i], values[i] = makeRecord(k, parts[i], l.cfg.Pad)
	}
	c := l.clients[node]
	l.ledger.sent(keys, parts, recs, values, c.BaseURL())
	req := Request{Sent: time.Now(), Node: c.BaseURL(), Records: len(keys), Probe: probe}
	resp, err := c.Produce(context.Background(), l.cfg.Namespace, l.cfg.Stream, recs)
	req.Done = time.Now()
	if err == nil {
		req.OK = true
		l.ledger.answered(keys, req, resp.Offsets, Acked)
		return true
	}
	req.Err = err.Error()
	if req.Kind = streamapi.ErrorCode(err); req.Kind == "" {
		req.Kind = "network"
		if !errors.Is(err, streamapi.ErrNetwork) {
			req.Kind = "other"
		}
	}
	l.ledger.answered(keys, req, nil, classify(err))
	return false
}

// classify maps a produce error to what it says about the write: a 4xx answer or
// commit_failed means nothing was written; anything else may have been.
func classify(err error) Outcome {
	var ae *streamapi.APIError
	if errors.As(err, &ae) {
		if ae.Detail.Code == streamapi.CodeCommitFailed || (ae.Status >= 400 && ae.Status < 500) {
			return Failed
		}
	}
	return Unknown
}

func (l *Load) writer(w int) {
	defer l.wg.Done()
	node := w % len(l.clients)
	for !l.stopped() {
		base := l.nextID.Add(int64(l.cfg.PerRequest)) - int64(l.cfg.PerRequest)
		keys := make([]AttemptKey, l.cfg.PerRequest)
		parts := make([]int32, l.cfg.PerRequest)
		for i := range keys {
			keys[i] = AttemptKey{ID: base + int64(i)}
			parts[i] = int32((base + int64(i)) % int64(l.cfg.Partitions))
		}
		for attempt := 0; ; attempt++ {
			for i := range keys {
				keys[i].Attempt = attempt
			}
			ok := l.produce(node, keys, parts, false)
			node = (node + 1) % len(l.clients) // spread load; after an error, another node
			if ok || l.stopped() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// prober sends one-record produces every ProbeEvery, each in its own goroutine (at most
// 64 at once), never retried: the timeline's probes show when produce works.
func (l *Load) prober() {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.ProbeEvery)
	defer t.Stop()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		select {
		case l.probes <- struct{}{}:
		default:
			continue // 64 probes already waiting
		}
		id := l.nextID.Add(1) - 1
		node := int(l.rr.Add(1) % uint64(len(l.clients)))
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-l.probes }()
			l.produce(node, []AttemptKey{{ID: id}}, []int32{int32(id % int64(l.cfg.Partitions))}, true)
		}()
	}
}

// tail long-polls partition p from offset 0, checking every answer is dense and in order
// from the offset asked, and records what it read in the ledger.
func (l *Load) tail(p int32) {
	defer l.wg.Done()
	node := int(p) % len(l.clients)
	var next int64
	for !l.stopped() {
		c := l.clients[node]
		resp, err := c.Fetch(context.Background(), l.cfg.Namespace, l.cfg.Stream, p, next, 1<<20, 500*time.Millisecond)
		if err != nil {
			if streamapi.ErrorCode(err) == streamapi.CodeOffsetOutOfRange {
				l.ledger.staleRead() // next was served by another node: this one lags
			}
			node = (node + 1) % len(l.clients)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		keys := make([]AttemptKey, 0, len(resp.Records))
		for i, r := range resp.Records {
			if r.Offset == nil || *r.Offset != next+int64(i) {
				l.ledger.violation("tail partition %d from %d on %s: record %d has offset %v, want %d", p, next, c.BaseURL(), i, r.Offset, next+int64(i))
				break
			}
			k, err := attemptOf(r)
			if err != nil {
				l.ledger.violation("tail partition %d offset %d on %s: %v", p, *r.Offset, c.BaseURL(), err)
				break
			}
			keys = append(keys, k)
		}
		if len(keys) > 0 {
			l.ledger.observe(p, next, keys, c.BaseURL())
			next += int64(len(keys))
			if resp.NextOffset != next && len(keys) == len(resp.Records) {
				l.ledger.violation("tail partition %d on %s: next_offset %d after records up to %d", p, c.BaseURL(), resp.NextOffset, next-1)
			}
		}
		if resp.HighWatermark < next {
			l.ledger.violation("tail partition %d on %s: high watermark %d below records read up to %d", p, c.BaseURL(), resp.HighWatermark, next)
		}
	}
}

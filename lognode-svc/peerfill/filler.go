package peerfill

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Path is the route a peer serves fills on.
const Path = "/internal/v1/tail"

// Defaults of Config.
const (
	DefaultQueueBytes   = 64 << 20
	DefaultFrameBytes   = 8 << 20
	DefaultSendTimeout  = 2 * time.Second
	DefaultPeersRefresh = 2 * time.Second
	// MaxFrameBytes is the largest frame a receiver reads.
	MaxFrameBytes = 32 << 20
)

// Peer is a zone peer to fill.
type Peer struct {
	ID   string
	Addr string // host:port of its peer listener
}

// Config configures a Filler.
type Config struct {
	// Peers lists the live peers of this node's zone, this node excluded. It is called at
	// most once per PeersRefresh.
	Peers        func(ctx context.Context) ([]Peer, error)
	TLS          *tls.Config // client TLS towards peers (the cluster identity); nil: plaintext
	QueueBytes   int64       // bound of chunks waiting to be sent (default 64 MiB)
	FrameBytes   int         // chunks sent per request, in bytes (default 8 MiB; at most MaxFrameBytes)
	SendTimeout  time.Duration
	PeersRefresh time.Duration
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
}

// Filler sends committed chunks to zone peers. Enqueue never blocks.
type Filler struct {
	cfg    Config
	client *http.Client
	scheme string

	mu     sync.Mutex
	queue  []Chunk
	qbytes int64
	wake   chan struct{}
	closed bool

	peers   []Peer
	peersAt time.Time

	sent, dropped, failed *prometheus.CounterVec
	sentBytes             prometheus.Counter

	done chan struct{}
}

// NewFiller starts a Filler; Close stops it.
func NewFiller(cfg Config) (*Filler, error) {
	if cfg.Peers == nil {
		return nil, fmt.Errorf("peerfill: Config.Peers is required")
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.FrameBytes <= 0 {
		cfg.FrameBytes = DefaultFrameBytes
	}
	cfg.FrameBytes = min(cfg.FrameBytes, MaxFrameBytes)
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.PeersRefresh <= 0 {
		cfg.PeersRefresh = DefaultPeersRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Filler{cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{}), scheme: "http"}
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, TLSClientConfig: cfg.TLS, ForceAttemptHTTP2: cfg.TLS != nil}
	if cfg.TLS != nil {
		f.scheme = "https"
	}
	f.client = &http.Client{Transport: tr, Timeout: cfg.SendTimeout}
	f.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_peer_fill_chunks_sent_total",
		Help: "Committed chunks sent to zone peers' tail caches (one per chunk and peer)."}, nil)
	f.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_peer_fill_chunks_dropped_total",
		Help: "Committed chunks not sent to zone peers, by reason (queue_full, closed)."}, []string{"reason"})
	f.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_peer_fill_requests_failed_total",
		Help: "Fill requests to a zone peer that failed (the peer reads those chunks from the bucket)."}, nil)
	f.sentBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_peer_fill_bytes_sent_total",
		Help: "Bytes of fill frames sent to zone peers."})
	if r := cfg.Registerer; r != nil {
		for _, c := range []prometheus.Collector{f.sent, f.dropped, f.failed, f.sentBytes} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("peerfill: metrics: %w", err)
			}
		}
	}
	go f.run()
	return f, nil
}

// Enqueue queues committed chunks for the zone peers. Chunks beyond the queue's bound are
// dropped (counted): peers read them from the bucket. The chunks' Batches must not change
// afterwards.
func (f *Filler) Enqueue(chunks []Chunk) {
	f.mu.Lock()
	for _, c := range chunks {
		sz := int64(c.size())
		if f.closed {
			f.dropped.WithLabelValues("closed").Inc()
			continue
		}
		if f.qbytes+sz > f.cfg.QueueBytes {
			f.dropped.WithLabelValues("queue_full").Inc()
			continue
		}
		f.queue = append(f.queue, c)
		f.qbytes += sz
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Close stops the sender; chunks still queued are dropped.
func (f *Filler) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.mu.Unlock()
	close(f.wake)
	<-f.done
	f.client.CloseIdleConnections()
}

// take removes up to FrameBytes of chunks (at least one) from the queue.
func (f *Filler) take() []Chunk {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, sz := 0, 0
	for n < len(f.queue) && n < MaxChunks && (n == 0 || sz+f.queue[n].size() <= f.cfg.FrameBytes) {
		sz += f.queue[n].size()
		n++
	}
	out := f.queue[:n:n]
	f.queue = f.queue[n:]
	if len(f.queue) == 0 {
		f.queue = nil
	}
	f.qbytes -= int64(sz)
	return out
}

func (f *Filler) run() {
	defer close(f.done)
	var buf []byte
	for range f.wake {
		for {
			chunks := f.take()
			if len(chunks) == 0 {
				break
			}
			buf = Append(buf[:0], chunks)
			f.send(buf, len(chunks))
			if cap(buf) > 2*f.cfg.FrameBytes {
				buf = nil // an outsized frame's buffer is not kept
			}
		}
	}
	f.mu.Lock()
	for range f.queue {
		f.dropped.WithLabelValues("closed").Inc()
	}
	f.queue, f.qbytes = nil, 0
	f.mu.Unlock()
}

// send posts one frame to every zone peer at once and waits for all of them.
func (f *Filler) send(frame []byte, chunks int) {
	peers := f.currentPeers()
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.post(p, frame); err != nil {
				f.failed.WithLabelValues().Inc()
				f.cfg.Logger.Debug("peer fill failed", "peer", p.ID, "addr", p.Addr, "err", err)
				return
			}
			f.sent.WithLabelValues().Add(float64(chunks))
			f.sentBytes.Add(float64(len(frame)))
		}()
	}
	wg.Wait()
}

func (f *Filler) post(p Peer, frame []byte) error {
	req, err := http.NewRequest(http.MethodPost, f.scheme+"://"+p.Addr+Path, bytes.NewReader(frame))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ContentType)
	res, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s", res.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func (f *Filler) currentPeers() []Peer {
	if time.Since(f.peersAt) < f.cfg.PeersRefresh {
		return f.peers
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
	defer cancel()
	peers, err := f.cfg.Peers(ctx)
	if err != nil {
		f.cfg.Logger.Debug("peer fill: listing zone peers failed", "err", err)
		return f.peers // the last list stands until the registry answers
	}
	f.peers, f.peersAt = peers, time.Now()
	return peers
}

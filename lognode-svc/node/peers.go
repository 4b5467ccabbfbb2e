package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/peerfill"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
)

// peers fills the zone peers' tail caches with what this node commits, and serves the fills
// they send (package peerfill).
type peers struct {
	ln        net.Listener
	srv       *http.Server
	filler    *peerfill.Filler
	advertise string
	done      chan struct{}
}

// startPeers starts the peer listener and the filler, or answers nil when the node has no
// peer listener or no registry to find its peers in.
func startPeers(cfg *Config, rd *reader.Reader, reg prometheus.Registerer, log *slog.Logger) (*peers, error) {
	if cfg.Registry == nil || (cfg.PeerAddr == "" && cfg.PeerListener == nil) {
		return nil, nil
	}
	h, err := peerfill.NewHandler(func(c peerfill.Chunk) { rd.Committed(c.StreamID, c.Partition, c.Entry, c.Batches...) }, reg)
	if err != nil {
		return nil, err
	}
	ln := cfg.PeerListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.PeerAddr); err != nil {
			return nil, fmt.Errorf("node: listen %s (peer fills): %w", cfg.PeerAddr, err)
		}
	}
	p := &peers{ln: ln, advertise: cfg.PeerAdvertise, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	if p.advertise == "" {
		p.advertise = ln.Addr().String()
	}
	fcfg := peerfill.Config{QueueBytes: cfg.PeerQueueBytes, Logger: log, Registerer: reg,
		Peers: func(ctx context.Context) ([]peerfill.Peer, error) {
			live, err := cfg.Registry.Live(ctx, cfg.Zone)
			if err != nil {
				return nil, err
			}
			var out []peerfill.Peer
			for _, n := range live {
				// Live answers every node when the zone has none; only the zone's own are
				// filled (others would cost cross-zone transfer).
				if n.ID != cfg.NodeID && n.Zone == cfg.Zone && n.PeerAddr != "" {
					out = append(out, peerfill.Peer{ID: n.ID, Addr: n.PeerAddr})
				}
			}
			return out, nil
		}}
	serve := p.srv.Serve
	if id := cfg.PeerIdentity; id != nil {
		if !id.HasCA() || !id.HasCertificate() {
			ln.Close()
			return nil, errors.New("node: the peer identity needs the cluster CA and a certificate it issued")
		}
		p.srv.TLSConfig = id.ServerConfig() // requires a client certificate of the cluster CA
		fcfg.TLS = id.PeerClientConfig()
		serve = func(ln net.Listener) error { return p.srv.ServeTLS(ln, "", "") }
	}
	if p.filler, err = peerfill.NewFiller(fcfg); err != nil {
		ln.Close()
		return nil, err
	}
	go func() {
		defer close(p.done)
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("peer fill listener stopped", "err", err)
		}
	}()
	log.Info("peer fill listener serving", "addr", ln.Addr().String(), "advertise", p.advertise, "tls", cfg.PeerIdentity != nil)
	return p, nil
}

// enqueue queues what was committed for the zone peers.
func (p *peers) enqueue(cs []writer.Committed) {
	chunks := make([]peerfill.Chunk, len(cs))
	for i, c := range cs {
		chunks[i] = peerfill.Chunk{StreamID: c.StreamID, Partition: c.Partition, Entry: c.Entry, Batches: c.Batches}
	}
	p.filler.Enqueue(chunks)
}

func (p *peers) close() {
	p.filler.Close()
	p.srv.Close()
	<-p.done
}

// peerSink hands commits to the peers once they have started (commits cannot come before:
// no listener serves produce yet).
type peerSink struct {
	p atomic.Pointer[peers]
	// keep, when set, says whether a stream's chunks may go to peers: chunks of namespaces
	// with a key never do (their plaintext would cross the network, and a fill arriving
	// after a shred would cache it again).
	keep func(streamID uint64) bool
}

func (s *peerSink) committed(cs []writer.Committed) {
	p := s.p.Load()
	if p == nil {
		return
	}
	if s.keep != nil {
		kept := make([]writer.Committed, 0, len(cs))
		for _, c := range cs {
			if s.keep(c.StreamID) {
				kept = append(kept, c)
			}
		}
		cs = kept
	}
	if len(cs) > 0 {
		p.enqueue(cs)
	}
}

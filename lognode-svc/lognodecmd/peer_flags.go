package lognodecmd

import (
	"flag"
	"fmt"
	"net"

	"github.com/loamhq/loam/lognode-svc/node"
)

// peerFlags configure the peer listener, through which zone peers fill each other's tail
// caches with what they commit (node.Config's peer block).
type peerFlags struct {
	addr, advertise string
	queueBytes      int64
}

func (f *peerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "peer-addr", env("LOAM_PEER_ADDR", "127.0.0.1:0"), "peer listener: zone peers found in the node registry send it the chunks they commit, for the tail cache (host:0 picks a free port; empty: no fills either way; with --cluster-ca it requires the cluster identity)")
	fs.StringVar(&f.advertise, "peer-advertise", env("LOAM_PEER_ADVERTISE", ""), "host:port peers reach the peer listener at (default: its address; this host's first IPv4 address when it listens on all interfaces)")
	fs.Int64Var(&f.queueBytes, "peer-queue-bytes", 64<<20, "bound of committed chunks waiting to be sent to zone peers (beyond it they are dropped and peers read the bucket)")
}

func (f *peerFlags) apply(cfg *node.Config) error {
	cfg.PeerAddr, cfg.PeerQueueBytes = f.addr, f.queueBytes
	cfg.PeerAdvertise = f.advertise
	if f.addr == "" || f.advertise != "" {
		return nil
	}
	host, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		return fmt.Errorf("--peer-addr %q: %w", f.addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if port == "0" {
			// The port is known once the listener is open: node.Start advertises it.
			return nil
		}
		if h := hostIP(); h != "" {
			cfg.PeerAdvertise = net.JoinHostPort(h, port)
		}
	}
	return nil
}

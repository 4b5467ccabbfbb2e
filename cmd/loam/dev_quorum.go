package main

import (
	"flag"
	"fmt"

	"github.com/loamhq/loam/local/devcluster"
)

// devQuorumFlags are loam dev's quorum-class flags (docs/quorum.md).
type devQuorumFlags struct{ port int }

func (f *devQuorumFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.port, "journal-port", 0, "serve class quorum: the journal's Raft ports are this port and the next two (one process: three in-process journal members, the log node's and two more; with --nodes 3 or more: node-1..node-3 are its members, node i listening on port+i-1); 0: quorum streams are refused")
}

func (f *devQuorumFlags) apply(cfg *devcluster.Config, host string) error {
	if f.port < 0 || f.port > 65535-64 {
		return fmt.Errorf("dev: --journal-port %d: want a port, or 0 for none", f.port)
	}
	cfg.Quorum = devcluster.QuorumConfig{Port: f.port, Host: host}
	return nil
}

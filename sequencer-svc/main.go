// Command sequencer-svc runs one voter of Loam's Raft metastore (the sequencer): the
// loam.meta.v1.Sequencer gRPC service on --rpc-addr and Raft on --raft-addr. All the logic
// lives in sequencer-svc/server; this file only wires flags, logs and signals.
//
//	sequencer-svc --id seq-1 --data-dir /var/lib/loam/seq --bootstrap
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sequencer-svc:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := server.DefaultConfig()
	var peers string
	flag.StringVar(&cfg.ID, "id", cfg.ID, "Raft server id, unique in the group")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "directory for state.db, raft.db and snapshots (required)")
	flag.StringVar(&cfg.RPCAddr, "rpc-addr", cfg.RPCAddr, "gRPC listen address")
	flag.StringVar(&cfg.RaftAddr, "raft-addr", cfg.RaftAddr, "Raft transport address")
	flag.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "Raft address other voters dial (default: --raft-addr)")
	flag.BoolVar(&cfg.Bootstrap, "bootstrap", false, "bootstrap a new group of this node and --peers when the data dir is empty")
	flag.StringVar(&peers, "peers", "", "other voters, id=raftaddr,id=raftaddr (with --bootstrap)")
	flag.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cfg.SnapshotThreshold, "Raft entries between snapshots")
	flag.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "how often the snapshot threshold is checked")
	flag.Uint64Var(&cfg.TrailingLogs, "trailing-logs", cfg.TrailingLogs, "Raft entries kept after a snapshot")
	fast := flag.Bool("fast-raft", false, "Raft timeouts for a single voter on one machine (50 ms heartbeat)")
	flag.Parse()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg.Logger = logger
	var err error
	if cfg.Peers, err = server.ParsePeers(peers); err != nil {
		return err
	}
	if *fast {
		cfg.FastTimeouts()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	node, err := server.Start(startCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down")
	return node.Close()
}

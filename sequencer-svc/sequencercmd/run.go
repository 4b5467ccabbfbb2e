// Package sequencercmd is the sequencer-svc command: it runs one voter of Loam's Raft metastore (the sequencer): the
// loam.meta.v1.Sequencer gRPC service on --rpc-addr and Raft on --raft-addr. All the logic
// lives in sequencer-svc/server; this file only wires flags, logs and signals.
//
// A new three-voter group (each voter names the others; only a data dir without Raft state
// bootstraps, so the same command line restarts a voter):
//
//	sequencer-svc --id seq-1 --data-dir /var/lib/loam/seq --rpc-addr 10.0.1.5:7070 --raft-addr 10.0.1.5:7071 \
//	  --bootstrap --peers seq-2=10.0.2.5:7071,seq-3=10.0.3.5:7071
//
// A voter joining a running group (an empty data dir; --join names RPC addresses of any
// voters):
//
//	sequencer-svc --id seq-4 --data-dir /var/lib/loam/seq --rpc-addr 10.0.1.6:7070 --raft-addr 10.0.1.6:7071 \
//	  --join 10.0.1.5:7070,10.0.2.5:7070
//
// With the cluster identity (mutual TLS against the cluster CA; docs/tls.md) add, to each
// voter and to the membership subcommands:
//
//	--tls-cert seq-1.pem --tls-key seq-1-key.pem --cluster-ca cluster-ca.pem
//
// Membership of a running group:
//
//	sequencer-svc members --cluster 10.0.1.5:7070
//	sequencer-svc remove --cluster 10.0.1.5:7070 seq-2
//
// Backups of the state machine to a bucket (the leader, every --backup-interval, and any
// voter on SIGUSR1), and a new group from the newest one after every volume was lost:
//
//	sequencer-svc ... --backup-bucket s3://my-bucket --backup-interval 1h
//	sequencer-svc restore --from s3://my-bucket --data-dir /var/lib/loam/seq --id seq-1 \
//	  --raft-addr 10.0.1.5:7071 --peers seq-2=10.0.2.5:7071,seq-3=10.0.3.5:7071
//	# then start seq-1 (without --bootstrap) and seq-2, seq-3 on empty data dirs
package sequencercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/emf"
	"github.com/loamhq/loam/shared/envflag"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// Vars are the environment variables of the flags not named by envflag's rule: every
// other flag --x-y is also set by LOAM_X_Y (docs/configuration.md).
var Vars = envflag.Vars{"id": {"LOAM_SEQUENCER_ID"}}

// RestoreVars are those of the restore subcommand: --from is the voters' backup bucket.
var RestoreVars = envflag.Vars{"id": {"LOAM_SEQUENCER_ID"}, "from": {"LOAM_BACKUP_BUCKET"}}

// Flags are the flag sets of the voter ("") and of each subcommand, as Main defines them
// (for the configuration table); their defaults are those of the current environment.
func Flags() map[string]*flag.FlagSet {
	out := map[string]*flag.FlagSet{}
	keep := func(name string) func(*flag.FlagSet) { return func(fs *flag.FlagSet) { out[name] = fs } }
	_ = run(nil, keep(""))
	_ = restore(nil, keep("restore"))
	_, _, _, _ = admin("members", nil, "", keep("members"))
	_, _, _, _ = admin("remove", nil, "ID", keep("remove"))
	_, _, _, _ = admin("journals", nil, "", keep("journals"))
	_, _, _, _ = admin("move-partition", nil, "NAMESPACE/STREAM PARTITION JOURNAL", keep("move-partition"))
	return out
}

// errInspected ends a command that only defined its flags.
var errInspected = errors.New("flags inspected")

// Main runs the sequencer-svc command with the command-line arguments args (without the
// program name): a voter until SIGINT or SIGTERM, or one of its subcommands (members, remove,
// restore). A flag not on the command line is read from its environment variable (Vars).
func Main(args []string) error {
	switch {
	case len(args) > 0 && args[0] == "members":
		return members(args[1:])
	case len(args) > 0 && args[0] == "remove":
		return remove(args[1:])
	case len(args) > 0 && args[0] == "journals":
		return journals(os.Stdout, args[1:])
	case len(args) > 0 && args[0] == "move-partition":
		return movePartition(os.Stdout, args[1:])
	case len(args) > 0 && args[0] == "restore":
		return restore(args[1:], nil)
	}
	return run(args, nil)
}

// run runs a voter; with inspect set it hands the defined flag set to it and returns.
func run(args []string, inspect func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("sequencer-svc", flag.ExitOnError)
	cfg := server.DefaultConfig()
	var peers, join string
	fs.StringVar(&cfg.ID, "id", cfg.ID, "Raft server id, unique in the group")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for state.db, raft.db and snapshots (required)")
	fs.StringVar(&cfg.RPCAddr, "rpc-addr", cfg.RPCAddr, "gRPC listen address")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", cfg.RaftAddr, "Raft transport address")
	fs.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "Raft address other voters dial (default: --raft-addr)")
	fs.BoolVar(&cfg.Bootstrap, "bootstrap", false, "bootstrap a new group of this node and --peers when the data dir is empty")
	fs.StringVar(&peers, "peers", "", "other voters, id=raftaddr,id=raftaddr (with --bootstrap)")
	fs.StringVar(&join, "join", "", "join the running group at these voters' RPC addresses, addr,addr (a data dir without Raft state; exclusive with --bootstrap)")
	joinTimeout := fs.Duration("join-timeout", 10*time.Minute, "how long --join may take (snapshot install and catch-up included)")
	fs.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cfg.SnapshotThreshold, "Raft entries between snapshots")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "how often the snapshot threshold is checked")
	fs.Uint64Var(&cfg.TrailingLogs, "trailing-logs", cfg.TrailingLogs, "Raft entries kept after a snapshot")
	fs.IntVar(&cfg.SnapshotRetain, "snapshot-retain", cfg.SnapshotRetain, "snapshots kept on disk")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", cfg.HeartbeatTimeout, "Raft heartbeat timeout: a follower without contact for this long (to twice it) starts an election")
	fs.DurationVar(&cfg.ElectionTimeout, "election-timeout", cfg.ElectionTimeout, "Raft election timeout")
	fs.DurationVar(&cfg.LeaderLeaseTimeout, "leader-lease-timeout", cfg.LeaderLeaseTimeout, "a leader without quorum contact for this long steps down (at most --heartbeat-timeout)")
	fs.DurationVar(&cfg.LeaderWait, "leader-wait", cfg.LeaderWait, "how long a follower waits for a reachable leader before answering NotLeader")
	fs.DurationVar(&cfg.ReadWait, "read-wait", cfg.ReadWait, "how long a follower waits to catch up with the leader's read index before forwarding a read")
	fs.DurationVar(&cfg.CommitTimeout, "commit-timeout", cfg.CommitTimeout, "Raft commit timeout: how long the leader waits before sending a heartbeat that carries the commit index")
	fs.DurationVar(&cfg.MaxClockSkew, "max-clock-skew", cfg.MaxClockSkew, "how far the leader's clock may run ahead of a majority of voters' clocks; a leader further ahead stamps nothing and hands leadership over")
	fs.DurationVar(&cfg.ClockOffset, "clock-offset", 0, "testing aid: shift this voter's clock by this much (e.g. 1h, -90s) wherever it stamps or reports time")
	fs.IntVar(&cfg.MaxProducers, "max-producers", meta.DefaultMaxProducers, "idempotent producers each namespace holds; a new one beyond it evicts the least recently used")
	tlsCert := fs.String("tls-cert", os.Getenv("LOAM_TLS_CERT"), "PEM certificate of the cluster CA this voter serves on RPC and Raft and presents to the other voters (valid for server and client auth), reloaded when the file changes; with --cluster-ca")
	tlsKey := fs.String("tls-key", os.Getenv("LOAM_TLS_KEY"), "PEM private key of --tls-cert")
	clusterCA := fs.String("cluster-ca", os.Getenv("LOAM_CLUSTER_CA"), "PEM cluster CA: every RPC caller and Raft peer must present a certificate it issued (mutual TLS); empty (and no --tls-cert): plaintext")
	clusterName := fs.String("cluster-server-name", os.Getenv("LOAM_CLUSTER_SERVER_NAME"), "name the other voters' certificates carry (default: the host of each address dialed)")
	var ef emf.Flags
	ef.Register(fs)
	backupBucket := fs.String("backup-bucket", os.Getenv("LOAM_BACKUP_BUCKET"), "bucket URL (s3://NAME[/PREFIX]?..., file:///DIR) the leader backs the state machine up to, under backups/sequencer/ (env LOAM_BACKUP_BUCKET); SIGUSR1 backs up at once; empty: no backups")
	backupInterval := fs.Duration("backup-interval", time.Hour, "how often the leader backs up (the recovery point if every voter's volume is lost)")
	backupKeep := fs.Int("backup-keep", 24, "newest backups kept in the bucket")
	fast := fs.Bool("fast-raft", false, "Raft timeouts for voters on one machine (50 ms heartbeat); overrides the timeout flags")
	var pf placementFlags // placement_flags.go
	pf.register(fs)
	if inspect != nil {
		inspect(fs)
		return nil
	}
	if err := envflag.Parse(fs, args, Vars); err != nil {
		return err
	}

	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg.Logger = logger
	var err error
	if cfg.Peers, err = server.ParsePeers(peers); err != nil {
		return err
	}
	for _, a := range strings.Split(join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Join = append(cfg.Join, a)
		}
	}
	if *fast {
		cfg.FastTimeouts()
	}
	if *tlsCert != "" || *tlsKey != "" || *clusterCA != "" {
		if *tlsCert == "" || *clusterCA == "" {
			return errors.New("--tls-cert and --cluster-ca go together: the sequencer serves TLS only to callers with a certificate of the cluster CA")
		}
		if cfg.TLS, err = tlsconf.Load(tlsconf.Config{CertFile: *tlsCert, KeyFile: *tlsKey, CAFile: *clusterCA,
			ServerName: *clusterName, Logger: logger}); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := pf.apply(ctx, &cfg); err != nil {
		return err
	}
	defer pf.close()
	startTimeout := time.Minute
	if len(cfg.Join) > 0 {
		startTimeout = *joinTimeout
	}
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	node, err := server.Start(startCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	// Whether this voter leads, for CloudWatch (--emf-interval): an alarm sums it over the
	// voters and fires when no voter leads.
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loam_sequencer_leader", Help: "1 on the Raft leader, 0 on other voters."},
		func() float64 {
			if node.IsLeader() {
				return 1
			}
			return 0
		}))
	if err := ef.Start(ctx, reg, emf.SequencerMetrics, nil, logger); err != nil {
		node.Close()
		return err
	}
	if *backupBucket != "" {
		b, err := objstore.Open(ctx, *backupBucket)
		if err != nil {
			node.Close()
			return fmt.Errorf("--backup-bucket: %w", err)
		}
		defer b.Close()
		now := make(chan struct{}, 1)
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		defer signal.Stop(usr1)
		go func() {
			for range usr1 {
				select {
				case now <- struct{}{}:
				default:
				}
			}
		}()
		go node.RunBackups(ctx, server.BackupConfig{Bucket: b, Interval: *backupInterval, Keep: *backupKeep, Now: now})
	}
	<-ctx.Done()
	logger.Info("shutting down")
	return node.Close()
}

// admin parses the flags of a membership subcommand and dials the group.
func admin(name string, args []string, usage string, inspect func(*flag.FlagSet)) (metagrpc.Admin, []string, func(), error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cluster := fs.String("cluster", "127.0.0.1:7070", "RPC addresses of voters, addr,addr")
	ca := fs.String("cluster-ca", os.Getenv("LOAM_CLUSTER_CA"), "PEM cluster CA of a sequencer that requires the cluster identity")
	cert := fs.String("tls-cert", os.Getenv("LOAM_TLS_CERT"), "PEM certificate of the cluster CA to present")
	key := fs.String("tls-key", os.Getenv("LOAM_TLS_KEY"), "PEM private key of --tls-cert")
	serverName := fs.String("cluster-server-name", os.Getenv("LOAM_CLUSTER_SERVER_NAME"), "name the voters' certificates carry")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sequencer-svc %s --cluster addr[,addr] %s\n", name, usage)
		fs.PrintDefaults()
	}
	if inspect != nil {
		inspect(fs)
		return nil, nil, nil, errInspected
	}
	if err := envflag.Parse(fs, args, Vars); err != nil {
		return nil, nil, nil, err
	}
	id, err := tlsconf.ClusterClient(*ca, *cert, *key, *serverName)
	if err != nil {
		return nil, nil, nil, err
	}
	var opts []metagrpc.Option
	if id != nil {
		opts = append(opts, metagrpc.WithTransportCredentials(id.ClientCredentials()))
	}
	c, err := metagrpc.Dial(context.Background(), strings.Split(*cluster, ","), opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	return c.(metagrpc.Admin), fs.Args(), func() { c.Close() }, nil
}

// members prints the group's servers.
func members(args []string) error {
	adm, _, done, err := admin("members", args, "", nil)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ms, err := adm.Members(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tRAFT\tRPC\tSUFFRAGE\tLEADER")
	for _, m := range ms {
		suffrage := "nonvoter"
		if m.Voter {
			suffrage = "voter"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\n", m.ID, m.RaftAddr, m.RPCAddr, suffrage, m.Leader)
	}
	return w.Flush()
}

// remove removes one server from the group.
func remove(args []string) error {
	adm, rest, done, err := admin("remove", args, "ID", nil)
	if err != nil {
		return err
	}
	defer done()
	if len(rest) != 1 {
		return errors.New("remove: want exactly one server id")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adm.RemoveServer(ctx, rest[0]); err != nil {
		return err
	}
	fmt.Printf("removed %s\n", rest[0])
	return nil
}

// journals prints the quorum class's journals, their partitions and the moves in
// progress.
func journals(out io.Writer, args []string) error {
	adm, _, done, err := admin("journals", args, "", nil)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := adm.(meta.Client).ListJournals(ctx)
	if err != nil {
		return err
	}
	loads := map[string]int{}
	for _, a := range p.Assignments {
		loads[a.Journal]++
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOURNAL\tEPOCH\tPARTITIONS\tMEMBERS")
	for _, j := range p.Journals {
		var ms []string
		for _, m := range j.Members {
			ms = append(ms, m.Node+"@"+m.Zone)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", j.ID, j.Epoch, loads[j.ID], strings.Join(ms, ","))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(p.Moves) > 0 {
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "\nSTREAM ID\tPARTITION\tFROM\tTO\tSTATE\tEND")
		for _, m := range p.Moves {
			fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%d\n", m.StreamID, m.Partition, m.From, m.To, m.State, m.End)
		}
		return w.Flush()
	}
	return nil
}

// movePartition requests the move of a quorum stream's partition to a journal (its
// journals carry it out: docs/quorum.md, "Moving a partition").
func movePartition(out io.Writer, args []string) error {
	adm, rest, done, err := admin("move-partition", args, "NAMESPACE/STREAM PARTITION JOURNAL", nil)
	if err != nil {
		return err
	}
	defer done()
	if len(rest) != 3 {
		return errors.New("move-partition: want NAMESPACE/STREAM PARTITION JOURNAL")
	}
	ns, name, ok := strings.Cut(rest[0], "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("move-partition: stream %q: want NAMESPACE/STREAM", rest[0])
	}
	var part int32
	if _, err := fmt.Sscan(rest[1], &part); err != nil || part < 0 {
		return fmt.Errorf("move-partition: partition %q: want a number >= 0", rest[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := adm.(meta.Client)
	st, _, err := mc.GetStream(ctx, ns, name)
	if err != nil {
		return err
	}
	if err := mc.AssignJournalPartitions(ctx, st.ID, []int32{part}, rest[2]); err != nil {
		return err
	}
	fmt.Fprintf(out, "move of %s partition %d to journal %s requested (sequencer-svc journals shows it until it completes)\n", rest[0], part, rest[2])
	return nil
}

// restore prepares an empty data dir as the first voter of a new group from a backup.
func restore(args []string, inspect func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fs.String("from", os.Getenv("LOAM_BACKUP_BUCKET"), "bucket URL the backups are in (as --backup-bucket)")
	key := fs.String("backup", "", "the backup object to restore (default: the newest under backups/sequencer/)")
	dataDir := fs.String("data-dir", "", "the new voter's data dir: must hold no sequencer state")
	id := fs.String("id", "seq-1", "the new voter's Raft server id")
	raftAddr := fs.String("raft-addr", "127.0.0.1:7071", "the Raft address the other voters reach it at (its --raft-advertise, else --raft-addr)")
	peers := fs.String("peers", "", "the new group's other voters, id=raftaddr,id=raftaddr (started with empty data dirs)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sequencer-svc restore --from BUCKET --data-dir DIR --id ID --raft-addr ADDR [--peers id=addr,...] [--backup KEY]")
		fs.PrintDefaults()
	}
	if inspect != nil {
		inspect(fs)
		return nil
	}
	if err := envflag.Parse(fs, args, RestoreVars); err != nil {
		return err
	}
	if *from == "" || *dataDir == "" {
		return errors.New("restore: --from and --data-dir are required")
	}
	ps, err := server.ParsePeers(*peers)
	if err != nil {
		return err
	}
	ctx := context.Background()
	b, err := objstore.Open(ctx, *from)
	if err != nil {
		return fmt.Errorf("restore: --from: %w", err)
	}
	defer b.Close()
	if *key == "" {
		keys, err := server.ListBackups(ctx, b)
		if err != nil {
			return fmt.Errorf("restore: list backups: %w", err)
		}
		if len(keys) == 0 {
			return fmt.Errorf("restore: no backup under %s in %s", server.BackupPrefix, *from)
		}
		*key = keys[0]
	}
	data, err := b.Get(ctx, *key)
	if err != nil {
		return fmt.Errorf("restore: %s: %w", *key, err)
	}
	h, err := server.RestoreDataDir(*dataDir, *id, *raftAddr, ps, data)
	if err != nil {
		return err
	}
	fmt.Printf("restored %s (Raft index %d, taken %s) into %s as voter %s of a group of %d.\n",
		*key, h.Index, h.Created.Format(time.RFC3339), *dataDir, *id, len(ps)+1)
	fmt.Println("Start it without --bootstrap, and the other voters on empty data dirs; commits after the backup are not in it.")
	return nil
}

// Package supervisor runs a Loam cluster on one machine as separate OS processes — N
// sequencer voters (sequencer-svc) and M log nodes (lognode-svc) sharing one bucket — and
// restarts any that dies. It is `loam dev --sequencers N --nodes M`, and the process-level
// tests in tests/cluster drive it.
//
// # Basics
//
// Start spawns the voters, runs Config.Setup (default: create namespace "default", which
// also waits for a leader), starts the background functions (Config.Functions), spawns the
// log nodes and returns when every log node's /healthz answers 200. A child runs
// Config.SequencerBin or Config.LognodeBin as it is, or else the running executable with
// the subcommand "sequencer" or "lognode" (loam's `loam sequencer`, `loam lognode`): one
// installed loam runs every process, from any directory.
//
// Layout, with the defaults (voter i counted from 0, log node j from 0):
//
//	seq-<i+1>   RPC host:7070+2i  Raft host:7071+2i  state in <data-dir>/seq-<i+1>/
//	node-<j+1>  HTTP host:8080+j  zone zone-a, zone-b, zone-a, …  disk cache <data-dir>/node-<j+1>/cache/
//	bucket      <data-dir>/bucket (filesystem; safe for many processes) or s3://…
//	logs        <data-dir>/logs/<id>.log, each child's stdout and stderr, appended
//	coord       <data-dir>/coord.db, served at http://host:<free port>
//	tls         <data-dir>/tls/<id>.pem and <id>-key.pem with TLS
//
// Every voter is started with --bootstrap and the others as --peers, the same
// configuration on all of them, so any may start first; bootstrap is ignored once a data
// dir holds Raft state. Log nodes get --sequencer with every voter's RPC address.
//
// <data-dir>/cluster.json lists every child with its pid (0 while down) and addresses:
//
//	{"sequencers": [{"id", "pid", "rpc", "raft"}], "nodes": [{"id", "pid", "http", "zone"}],
//	 "ca": "<data-dir>/tls/ca.pem" (with TLS), "coord": "http://…"}
//
// It is rewritten (temporary file + rename) whenever a child starts or exits.
//
// Restarts: a child that exits for any reason the supervisor did not ask for is restarted
// after Config.RestartBackoff (250 ms), doubling per quick death up to 10 s; a child that
// ran StableAfter (10 s) starts the count afresh. While the file <data-dir>/hold/<id>
// exists, a child that exits stays down (tests and people use it to keep a voter away).
// SIGSTOP/SIGCONT of a child are not exits: the supervisor does not notice them.
//
// Close stops log nodes first (SIGTERM, so they flush buffered writes through the
// sequencers), then the sequencers; whatever still runs after StopTimeout is killed.
//
// # Caveats
//
// Children run in their own process groups with a parent-death signal of SIGKILL: a
// terminal's Ctrl-C reaches only the supervisor, and a supervisor killed outright takes
// its children with it (Linux only).
//
// The voter count of a data dir is fixed by its first start (there is no join; it is
// recorded in <data-dir>/voters): Start refuses a data dir made with another
// --sequencers, and one holding the single-process `loam dev` cluster.
//
// Services of the supervising process (services.go): a coordination store, bbolt in
// <data-dir>/coord.db served over HTTP by coord.Handler on Host (loopback when Host is a
// wildcard) and a free port (only this process opens the file), which every log node gets as --coord: their node registry
// (GET /v1/cluster/nodes lists every live node) and the functions' leases. The coordination
// store's port is plaintext and unauthenticated, for one machine, or with Config.TLS HTTPS
// behind mutual TLS (the supervisor's own certificate of the CA, a caller's required). A
// child in a network namespace of its own (ChildNetns) does not reach it; its registry
// heartbeats fail with a warning in its log.
// With Config.Functions the segmenter, retention, compaction and GC run in this process
// (devcluster.StartFunctions): segments appear and retired WAL objects go away as on AWS.
//
// With Config.TLS (a local CA) each child gets its own certificate in <data-dir>/tls/ for
// its host: log nodes serve HTTPS, gRPC over TLS and present it to the voters and to the
// coordination store; voters serve RPC and Raft over mutual TLS. Setup, the readiness probes (HTTPS trusting the CA) and the
// functions present the CA's client certificate.
//
// Lock order: Supervisor.mu only; nothing else is locked while it is held.
package supervisor

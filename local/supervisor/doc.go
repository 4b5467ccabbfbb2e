// Package supervisor runs a Loam cluster on one machine as separate OS processes — N
// sequencer voters (sequencer-svc) and M log nodes (lognode-svc) sharing one bucket — and
// restarts any that dies. It is `loam dev --sequencers N --nodes M`, and the process-level
// tests in tests/cluster drive it.
//
// # Basics
//
// Start resolves the two binaries (Config.SequencerBin/LognodeBin, else FindBinary: next
// to the running executable, then PATH, then `go build` into <data-dir>/bin from a source
// checkout of the module containing the working directory), spawns the voters, runs
// Config.Setup (default: create namespace "default", which also waits for a leader),
// spawns the log nodes and returns when every log node's /healthz answers 200.
//
// Layout, with the defaults (voter i counted from 0, log node j from 0):
//
//	seq-<i+1>   RPC host:7070+2i  Raft host:7071+2i  state in <data-dir>/seq-<i+1>/
//	node-<j+1>  HTTP host:8080+j  zone zone-a, zone-b, zone-a, …  disk cache <data-dir>/node-<j+1>/cache/
//	bucket      <data-dir>/bucket (filesystem; safe for many processes) or s3://…
//	logs        <data-dir>/logs/<id>.log, each child's stdout and stderr, appended
//	binaries    <data-dir>/bin/ when built from a checkout
//
// Every voter is started with --bootstrap and the others as --peers, the same
// configuration on all of them, so any may start first; bootstrap is ignored once a data
// dir holds Raft state. Log nodes get --sequencer with every voter's RPC address.
//
// <data-dir>/cluster.json lists every child with its pid (0 while down) and addresses:
//
//	{"sequencers": [{"id", "pid", "rpc", "raft"}], "nodes": [{"id", "pid", "http", "zone"}]}
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
// Only the sequencers and log nodes run: not the background functions (segmenter,
// retention, compaction, GC) the single-process `loam dev` runs in-process, so WAL objects
// stay WAL objects. The log nodes keep no node registry unless given a coordination store
// all of them share (LognodeArgs "--coord dynamodb://…"; bbolt is one process only).
//
// A binary found on PATH wins over building from the checkout: in a checkout, a stale
// installed sequencer-svc or lognode-svc is used unless Config names the binaries.
//
// Lock order: Supervisor.mu only; nothing else is locked while it is held.
package supervisor

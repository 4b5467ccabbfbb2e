// Package server runs a sequencer voter: hashicorp/raft over the fsm state machine, with
// the raftlog store, a file snapshot store and the TCP transport, a watch hub, and the
// loam.meta.v1.Sequencer gRPC service. Start(ctx, Config) starts one (sequencer-svc's main
// and loam dev both call it); NewLocalClient(node) is a meta.Client without gRPC.
//
// # Basics
//
// Writes: the leader validates what it can without state (names, config, chunk shapes),
// refuses a CommitWal stamped more than meta.MaxClockAhead ahead of its clock
// (meta.ErrClockAhead), stamps the command with its clock and proposes it with
// raft.Apply. A follower answers *meta.NotLeaderError naming the leader's RPC address
// (each leader registers its address in the state machine). A proposal that timed out or
// lost leadership after it was submitted answers meta.ErrUnavailable: outcome unknown.
//
// Group commit: CommitWal requests go through one committer (committer.go) that keeps at
// most two proposals in flight; the commits that queue meanwhile are proposed together as
// one CommitWalBatch entry (each applied and answered as its own commit), so one Raft log
// write and one state transaction serve them all. A commit waiting alone goes out as a
// plain CommitWal.
//
// Background work (issue 4): AcquireLease, ReleaseLease, SwapIndex, TrimPartition and
// ForgetRetired are proposals like any write (the leader checks their shape first, and
// refuses a SwapIndex stamped more than meta.MaxClockAhead ahead); package fsm holds their
// rules.
//
// Reads (GetStream, ListStreams, ListNamespaces, Lookup, ListRetired, Referenced) read the
// serving node's bbolt state directly.
//
// Watch: after each applied batch the state machine publishes its events to the hub,
// which keeps the last Config.WatchRing events for replay. Watch(from) replays the events
// after from, then streams live ones; a from older than the ring gets one Event with Reset
// (at the newest index) first. A watcher whose queue (Config.WatchBuffer) is full is
// dropped at once, never blocking Apply, and is handed a Reset event when it catches up.
// After Restore (a snapshot installed from a leader) every watcher gets a Reset.
//
// Restart: the state database is durable and records the applied index, so Raft starts
// without restoring its snapshot and only entries past the database are replayed; a
// database behind the newest snapshot (or lost) is restored from it first. Start with
// Bootstrap and no Peers returns once the node leads and has applied its whole log.
//
// Files in Config.DataDir: state.db (fsm), raft.db (raftlog), snapshots/ (raft's file
// snapshot store).
//
// # Caveats
//
// Lock order: fsm.FSM's lock (held shared by ApplyBatch while it publishes), then hub.mu.
// Nothing is locked while hub.mu is held, and watchers' callbacks run with no lock held.
//
// Join and request forwarding are not built: a three-voter group is bootstrapped with
// Peers on one node, and clients follow NotLeader hints themselves (metagrpc does).
//
// Bootstrap with a Raft address on port 0 works but the address is recorded in the Raft
// configuration: restart on the same address.
package server

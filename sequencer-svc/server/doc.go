// Package server runs a sequencer voter: hashicorp/raft over the fsm state machine, with
// the raftlog store, a file snapshot store and the TCP transport, a watch hub, and the
// loam.meta.v1.Sequencer gRPC service. Start(ctx, Config) starts one (sequencer-svc's main
// and loam dev both call it); NewLocalClient(node) is a meta.Client without gRPC.
//
// # Basics
//
// Writes: the leader validates what it can without state (names, config, chunk shapes),
// refuses a CommitWal stamped more than meta.MaxClockAhead ahead of its clock
// (meta.ErrClockAhead), stamps the command with its clock, never more than
// Config.MaxClockSkew ahead of a majority of voters' clocks (the clock guard, clock.go:
// voters report their clocks to the leader; a leader too far ahead proposes nothing,
// hands leadership over and answers NotLeader), and proposes it with raft.Apply. A proposal that timed out or lost leadership after it was submitted answers
// meta.ErrUnavailable: outcome unknown. The Node's own methods run here or answer
// *meta.NotLeaderError naming the leader's RPC address (each leader registers its address
// in the state machine).
//
// Routing (forward.go): the gRPC service and NewLocalClient accept every call on any
// voter. A follower forwards a write (and AddVoter, RemoveServer, ReadIndex) unchanged to
// the leader over a pooled gRPC connection, marked with metagrpc.ForwardedHeader, and
// relays the answer; the leader runs the whole operation, clock guard included, and a
// forwarded request is never forwarded again. While an election runs the follower waits
// up to Config.LeaderWait for a leader. A NotLeader answer always means nothing was
// applied: the follower gives it only when a leader said so twice (a stale leader gets
// one retry with the leader it names) or when no connection to a leader was ready, so
// nothing was sent. Once a request was sent, a broken connection or a deadline is
// meta.ErrUnavailable (outcome unknown) and is not retried. A successful forwarded call
// names the leader in response header metagrpc.LeaderHeader; metagrpc clients move there.
//
// Group commit: CommitWal requests go through one committer (committer.go) that keeps at
// most two proposals in flight; the commits that queue meanwhile are proposed together as
// one CommitWalBatch entry (each applied and answered as its own commit), so one Raft log
// write and one state transaction serve them all. A commit waiting alone goes out as a
// plain CommitWal.
//
// Background work: AcquireLease, ReleaseLease, SwapIndex, TrimPartition and
// ForgetRetired are proposals like any write (the leader checks their shape first, and
// refuses a SwapIndex stamped more than meta.MaxClockAhead ahead); package fsm holds their
// rules.
//
// Reads (GetStream, ListStreams, ListNamespaces, Lookup, ListRetired, Referenced) are
// served from the answering voter's bbolt state once it is caught up: the leader once it
// has applied a barrier of its own term (after each election); a follower once its
// applied index reached the leader's read index, which it asks the leader for after the
// read arrived (ReadIndex: the leader's applied index; concurrent reads share one call).
// A follower still behind after Config.ReadWait forwards the read to the leader. So a
// read on any voter sees every write acknowledged before it started. Without a reachable
// leader reads fail (NotLeader or ErrUnavailable) rather than answer stale state. The Node
// read methods themselves read local state without this check.
//
// Watch: after each applied batch the state machine publishes its events to the hub,
// which keeps the last Config.WatchRing events, adding up to at most
// Config.WatchRingEntries index entries, for replay. Watch(from) replays the events
// after from, then streams live ones; a from older than the ring gets one Event with Reset
// (at the newest index) first. A watcher whose queue (Config.WatchBuffer) is full is
// dropped at once, never blocking Apply, and is handed a Reset event when it catches up.
// After Restore (a snapshot installed from a leader) every watcher gets a Reset.
//
// Membership (members.go): AddVoter (as voter or non-voter), RemoveServer and Members.
// Start with Config.Join (sequencer-svc --join) on a node that is not a voter adds it as a
// non-voter through any voter, waits until its state reached the leader's read index (a
// snapshot install, then the log), and promotes it, so the group keeps its fault tolerance
// while the new server catches up. A node already listed as a voter does not join again.
// Leader election needs no operator: hashicorp/raft elects a leader among the voters.
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
// Read consistency has one window: a leader cut off from its followers keeps serving
// reads (and read indexes) until it steps down after Config.LeaderLeaseTimeout without
// quorum contact, while a new leader may already be committing. Reads are never older than
// the last write this voter acknowledged, but may miss writes of the new leader in that
// window (hashicorp/raft's VerifyLeader would close it at a quorum round trip per read).
//
// Watch is not routed: a follower streams events as it applies them. A watch from now
// (fromIndex 0) first waits (best effort, up to Config.LeaderWait) until the voter caught
// up with the leader's read index.
//
// A removed server keeps its data dir; to add it again, wipe the dir and join. A server
// started with --join that crashed while a non-voter joins again on restart (AddVoter is
// idempotent).
//
// Bootstrap with a Raft address on port 0 works but the address is recorded in the Raft
// configuration: restart on the same address.
package server

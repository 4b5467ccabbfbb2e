// Package cluster is the process-level cluster harness: it runs `loam dev --sequencers N
// --nodes M` (local/supervisor), each sequencer voter and log node its own OS process on
// loopback ports sharing one filesystem bucket, drives it with a load generator, kills
// processes, and checks the result Jepsen-style.
//
// # Basics
//
// Build compiles loam, sequencer-svc and lognode-svc into one directory; Start runs the
// supervisor on a fresh data dir and reads <data-dir>/cluster.json for pids and addresses.
// Kill, Signal, Hold/Release (the supervisor's hold files), Stop, KillAll and Restart act
// on processes; Leader finds the Raft leader through every voter's Members answer;
// AppliedIndex (also from Members) and SnapshotIndex (its snapshots directory) tell how
// far one voter is; HighWatermarks and Index read one voter's state (a voter serves reads
// once caught up with the leader's read index).
//
// The load generator (StartLoad) runs writers that produce batches round-robin across the
// log nodes and retry a failed batch on the next node as a new attempt, an optional
// prober that sends a one-record produce every ProbeEvery (the timeline that measures
// failover), and optional tailers that long-poll each partition and check every answer is
// dense and in order. Every record names its attempt (headers id and a), so the ledger
// knows what each stored record is.
//
// The checker (FinalCheck, Verify) reads the whole stream from every log node, requires
// them to agree, and checks: offsets dense from 0 and in order; every record was sent,
// byte for byte; an acknowledged attempt is present exactly once at its acknowledged
// offset; a refused attempt (4xx or commit_failed) is absent; an attempt with an unknown
// outcome is present at most once; whatever a tailer read is what the log holds there.
//
// # Caveats
//
// Failover time is measured from the SIGKILL to the first successful answer to a produce
// sent after it, so it includes one produce's latency (a WAL flush interval, 250 ms by
// default, plus the PUT and the commit).
//
// The binaries are built without -race unless LOAM_CLUSTER_RACE=1: five race-enabled
// processes on two cores distort the timings this package measures.
package cluster

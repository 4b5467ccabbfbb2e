// Package fault is Loam's fault suite: it runs real clusters (`loam dev --sequencers N
// --nodes M`, the tests/cluster harness) under load while it breaks what production
// breaks, and ends every test with the tests/cluster checker: acknowledged ⇒ present
// exactly once at its offset; refused ⇒ absent; unknown ⇒ at most once.
//
// # Basics
//
// Object-store faults come from a fault profile (shared/objstore WithFaults, docs/faults.md)
// that every log node loads with --fault-profile and re-reads every second: a test writes
// an empty profile, starts the cluster and the load, writes the fault's profile, waits
// until the nodes' /metrics show the fault fired, keeps it on for a while, writes the
// empty profile again and measures how long produce takes to succeed again. Each test
// logs one FIGURE line: requests during the fault by outcome (acked, refused, unknown), the
// recovery time after the fault ended, and what the checker found lost (nothing, or the
// test fails).
//
// Clock skew runs a log node and a voter two minutes off (--clock-offset). Zone loss
// SIGKILLs every process of one zone at once and brings them back; the express zone loss
// does the same on an express stream whose three zonal buckets are versitygw servers, and
// kills that zone's server with it; the quorum zone loss on quorum streams, the zone being
// that of the journal leader's node, made the sequencer leader's zone too.
//
// # Caveats
//
// Recovery is measured from the moment the test rewrote the profile, so it includes up to
// the one second the nodes take to notice the new file, plus one produce's latency. The
// tests are heavy (a cluster each): run them by name, and not with other cluster tests.
// LOAM_FAULT_SECONDS stretches each fault's window (default 4 s).
package fault

// Package metapb holds the sequencer's protobuf messages and the loam.meta.v1.Sequencer gRPC
// service, generated from meta.proto by gen.sh (the generated files are committed; CI does
// not run protoc).
//
// # Basics
//
// The service messages mirror the Go types of package meta one to one; metagrpc converts.
// Command and the *Cmd messages are Raft log entries and the *Record messages are the state
// machine's bbolt values: both are durable, so fields are only ever added.
//
// # Caveats
//
// CommitWalCmd is column- and delta-encoded (see its comment) to keep the Raft log small;
// encode and decode it only through the sequencer's fsm package.
package metapb

//go:generate ./gen.sh

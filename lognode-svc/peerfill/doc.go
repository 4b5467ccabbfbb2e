// Package peerfill fills zone peers' tail caches at write time: when a log node commits a
// WAL object, it sends the committed chunks to the other live log nodes of its zone (found
// through the node registry), which put them in their tail caches as if they had written
// them. A consumer served by any node of the writer's zone then reads fresh records from
// memory, without a GET of the WAL object.
//
// Fills are best effort: a chunk that cannot be sent (queue full, peer down or slow) is
// dropped, and the peer reads it from the bucket as before. Nothing is acknowledged on a
// fill, and a peer only caches chunks the sequencer has committed.
//
// The transport is HTTP (POST /internal/v1/tail, a binary frame: codec.go) on a listener
// of its own, so it can require the cluster identity (mutual TLS against the cluster CA)
// while the client-facing listeners serve clients' certificates. Peers in other zones are
// never sent to: that traffic would cost cross-zone transfer.
//
// Memory: the send queue holds at most Config.QueueBytes of chunks (default 64 MiB); the
// receiver reads at most MaxFrameBytes per request, one request per peer at a time per
// sender.
package peerfill

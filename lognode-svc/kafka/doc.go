// Package kafka serves the Kafka wire protocol on a log node (docs/kafka.md): producers,
// consumers and admin tools that speak Kafka reach Loam streams through it.
//
// # Basics
//
// A Kafka topic is a Loam stream, a Kafka partition a stream partition and Kafka offsets
// Loam's dense offsets. Topics live in one namespace per connection: "default" when the
// listener serves without authentication, else the namespace of the API key the client
// authenticated with over SASL/PLAIN (the key is the password; an admin key acts in the
// namespace its user name names, "default" when empty) or SCRAM-SHA-256/512 (the key's id
// is the user name, the key the password, checked against the verifiers stored when the
// key was created; an admin key acts in the namespace the authzid names).
//
// The server is laid out as franz-go's kfake is: one file per API key (00_produce.go,
// 01_fetch.go, ...), each opening with the versions served, the behaviour and what is
// ignored. Every codec is franz-go's kmsg; ApiVersions lists exactly the keys and versions
// of those files (and of the group handler, when one is configured).
//
// Leaderless: any log node answers produce and fetch of any partition, so Metadata names
// one live log node of the client's zone as leader of each partition (the zone comes from
// "loam_az=<zone>" inside the client id; without one, any live node), or the advertised
// listener (a load balancer) as the only broker.
//
// Connections: requests of one connection are read and served in order, and answered in
// order. A produce is checked and buffered in the writer before the next request is read
// (so a producer's pipelined requests commit in sequence order), and its commit is waited
// for while the following requests are served: at most 5 answers wait at once per
// connection (Kafka clients keep at most 5 produce requests in flight per broker). A frame
// whose length prefix is over Config.MaxFrameBytes is refused before it is read and the
// connection closed with a logged reason; a frame reserves its length from a node-wide
// budget (Config.MaxInflightBytes) before it is read and holds it until answered.
//
// Memory bounds: frames being read, served or waiting for their commit at most
// MaxInflightBytes; connections at most MaxConnections; the live-node cache one list per
// zone asked for (at most 1024 zones) for a second; forwarding connections at most 64.
//
// # Caveats
//
// Transactions are not served (transactional produce and InitProducerId with a
// transactional id are refused). Fetch sessions are not kept: every fetch is a full one
// (the answer's session id is 0).
package kafka

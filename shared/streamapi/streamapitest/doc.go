// Package streamapitest is an in-memory server of the native HTTP API routes that the
// streamapi client and the loam command use: stream create, list, get, patch and delete,
// produce, and long-poll fetch. It exists so clients can be tested without a log node.
//
// # Basics
//
//	fake := streamapitest.New()            // namespace "default", no auth
//	srv := httptest.NewServer(fake)
//	defer srv.Close()
//	c, _ := streamapi.NewClient(srv.URL)
//
// It answers as the log node does, and Conformance (an exported suite of the API's
// behaviours, docs/http-api.md) holds it to that: the fake and the log node's real server
// both run it. Record JSON carries value or value_base64 (fetch answers value only when
// the stored bytes come back unchanged from a JSON decoder, streamapi.FetchAsJSON;
// "value": null, or no value field, is a tombstone); produce answers offsets in request
// order and a "v1." token; fetch answers records (without a partition field),
// next_offset, high_watermark and log_start; errors answer {"error": {"code", "message"}}
// with the log node's statuses and codes, plus 401 unauthorized under WithAPIKey and
// whatever FailNext injects. Produce picks a record's partition from its partition field,
// else the Kafka default partitioner (murmur2 of the key), else round-robin per request.
// Trim moves a partition's log start, as retention would. The binary fast path is served
// too: produce of RecordBatch v2 bytes (checked with streamapi.CheckBatches, as the log
// node checks them) and fetch of the stored batches to an Accept naming
// streamapi.MediaRecordBatch. Headers are the ordered list Kafka has.
//
// # Caveats
//
//   - It is a test double, not a log node: nothing is durable, there is no WAL, no
//     sequencer, no idempotence and no retention or compaction of its own.
//   - Limits are the log node's defaults (8 MiB bodies, 1 MiB records, 100,000 records per
//     produce, max_bytes up to 64 MiB, max_wait_ms up to 300000, default 0). max_bytes
//     counts stored batch bytes as the log node does: each JSON produce's share of a
//     partition is one RecordBatch, each batch of a binary produce one, and a fetch answers
//     whole batches, at least one. Memory grows with what is produced: it is a test double.
//   - Only class standard is served (express and quorum answer unsupported_class), as on
//     a deployment without them. Round-robin counts per stream, the log node per node.
//   - The node's admission limits (in-flight body budget, concurrent requests) and
//     /healthz, /metrics and /v1/cluster/nodes are not served.
//   - One mutex guards all state; waiting fetches hold no lock.
package streamapitest

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
// It follows ARCHITECTURE.md "Native HTTP routes" and docs/http-api.md: record JSON with
// value or value_base64 (fetch answers value when the stored bytes are valid UTF-8 JSON;
// "value": null, or no value field, is a tombstone), produce answers offsets
// in request order, fetch answers records, next_offset, high_watermark and log_start, and
// errors answer {"error": {"code", "message"}} with these statuses: 400 bad_request,
// invalid_json, invalid_record, invalid_argument, unsupported_class, partition_not_found
// (produce); 401 unauthorized; 404 namespace_not_found, stream_not_found,
// partition_not_found (fetch), not_found; 405 method_not_allowed; 409 stream_exists;
// 413 request_too_large; 415 unsupported_media_type;
// 416 offset_out_of_range (with log_start and high_watermark); and whatever FailNext
// injects. Produce picks a record's partition from its partition field, else the Kafka
// default partitioner (murmur2 of the key), else round-robin per request. Trim moves a
// partition's log start, as retention would.
//
// # Caveats
//
//   - It is a test double, not a log node: nothing is durable, there is no WAL, no
//     sequencer, no idempotence and no retention or compaction of its own.
//   - Limits follow the log node's (8 MiB bodies, max_bytes up to 64 MiB, max_wait_ms up
//     to 300000, default 0) but not its per-record limit; max_bytes counts key, value and
//     header bytes, not stored batch bytes. Express and quorum classes are accepted.
//   - One mutex guards all state; waiting fetches hold no lock.
package streamapitest

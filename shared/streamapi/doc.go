// Package streamapi holds the wire types of Loam's native HTTP API (docs/http-api.md): the
// JSON bodies and the binary fast path's framing (RecordBatch v2 bytes, MediaRecordBatch,
// checked by CheckBatches), and a Go client for it. The log node's HTTP server and the loam
// command both use them, so the two cannot drift apart.
//
// Record JSON, as produced and as fetched:
//
//	{"key": "k", "value": <any JSON>, "headers": [{"key": "h", "value": "v"}], "partition": 0, "timestamp": 1732870000000}
//
// A value that is not JSON travels as "value_base64" instead of "value" (likewise a key that
// is not UTF-8 as "key_base64"). Fetch answers "value" when the stored bytes are one JSON
// text in valid UTF-8 without whitespace around it and not the literal null (FetchAsJSON),
// else "value_base64", so a fetch answer is always valid JSON and gives the bytes back
// exactly. A record with no value field, or with "value": null, has a null value
// (a tombstone); an empty value travels as "value_base64": "" (the base64 fields are tagged
// omitzero, so a nil slice is absent and an empty one is not). Headers are Kafka's: an
// ordered list whose keys may repeat and whose values may be null or binary (Header, Headers);
// the older object form {"h": "v"} is still read.
//
// # Basics
//
// Build a client with the log node's HTTP address; everything else is optional:
//
//	c, err := streamapi.NewClient("http://127.0.0.1:8080", streamapi.WithAPIKey(key))
//	st, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "orders"})
//	v, _ := streamapi.JSONValue(map[string]any{"id": 1})
//	res, err := c.Produce(ctx, "default", "orders", []streamapi.Record{v})
//	got, err := c.Fetch(ctx, "default", "orders", 0, res.Offsets[0].Offset, 1<<20, 5*time.Second)
//	b, err := got.Records[0].Bytes() // `{"id":1}`
//
// Records are built with JSONValue (a Go value marshalled to JSON), BytesValue (raw bytes,
// always value_base64) or AutoValue (value when the bytes are valid UTF-8 JSON, else
// value_base64: the rule fetch applies); SetKey picks key or key_base64 the same way.
// Bytes and KeyBytes give the bytes back whichever field carried them.
//
// Errors: an answer outside 2xx is an *APIError carrying the HTTP status and the server's
// ErrorDetail (use errors.As, or ErrorCode for the code alone). A request that never got
// an answer wraps ErrNetwork; an answer that cannot be decoded wraps ErrBadResponse.
// IsRetriable reports whether a retry may succeed. The caller's own context ending is
// returned as the context's error, never as ErrNetwork.
//
// Transport: Produce and Fetch use the binary fast path by default: Produce builds one
// RecordBatch v2 per target partition (compressed with WithCompression) and Fetch decodes
// the stored batches, so neither encodes nor decodes JSON; what they return is the same as
// over JSON. WithJSON switches both to the JSON bodies.
//
// Timeouts: every call runs under the client's request timeout (WithTimeout, default 30 s);
// Fetch adds its maxWait to it, so a long-poll is never cut short by the client.
//
// # Caveats
//
//   - A produce that failed with ErrNetwork, or with the code commit_unknown, may or may not
//     have been written: retrying it can write the records twice. IsRetriable says a retry
//     may succeed, not that it is free of duplicates.
//   - Produce sends a JSON value's text verbatim (the server stores it byte for byte), but
//     whitespace around the value is dropped, and JSON values built by encoding/json
//     elsewhere (marshalling a Record yourself) are compacted. JSONValue never escapes HTML.
//   - JSON null is the null value: AutoValue([]byte("null")) is a tombstone. Stored bytes
//     that read "null" (written by a Kafka client, or sent with BytesValue) come back in
//     value_base64, not as a tombstone.
//   - On the binary path records without a Timestamp get the client's clock (the JSON
//     path stamps the node's); keyed records without a Partition are placed by the client,
//     with the partition count it learnt from GetStream (kept PartitionCacheTTL). Records
//     of one Produce that go to several partitions travel in one request per partition,
//     sent at once: each commits on its own, and a failure of some answers ErrPartialCommit
//     with each record's outcome (JSON: one request, all partitions in one commit).
//   - Fetch answers "value" for stored bytes that are valid JSON, so a value produced with
//     BytesValue comes back in Value when it happens to be JSON; Bytes hides the difference.
//   - The client holds no state beyond its connection pool: offsets, partition choice and
//     retries belong to the caller.
package streamapi

// Package cloudevents is Loam's CloudEvents 1.0 codec: structured JSON
// (application/cloudevents+json), batch JSON (application/cloudevents-batch+json), HTTP
// binary mode (ce-* headers), the protobuf format (application/cloudevents+protobuf and
// the batch form) and the record layout events are stored in.
//
// # Basics
//
// An Event keeps its attributes in the order they arrived, each as a name, its value in
// the attribute's canonical string form and, for extensions, its type. Its data is the
// bytes the record stores as its value. Attribute names, values and order therefore
// round-trip byte for byte through every format (HTTP binary mode has no order: headers
// are unordered, so its events take the canonical order, see DecodeBinary).
//
// The record layout is the CloudEvents Kafka protocol binding's binary mode: every context
// attribute and extension is a header ce_<name> holding its canonical string form, in the
// event's order, except datacontenttype, which is the header content-type at its place; the
// partitionkey extension is also the record key; the data is the value. An extension whose
// value is not a string in its format (a JSON number or boolean; a protobuf ce_integer,
// ce_boolean, ce_uri, ce_uri_ref, ce_timestamp or ce_bytes) is also named in one header
// loam_ce_types ("count=integer,flag=boolean"), written last, so structured JSON and
// protobuf output write it back with its type. Binary-mode output omits that header.
//
// FromRecord reads any record back as an event, in the first form that applies: ce_
// headers that validate; a Kafka structured-mode value (content-type
// application/cloudevents+json) passed through unchanged; else an envelope synthesized
// from the record (id {stream_id}-{offset}, type dev.loam.stream.record).
//
// Validation (Validate, run by every decoder) refuses an event, naming the attribute,
// when specversion is not 1.0, when id, source or type is missing or empty, when time is
// not RFC 3339, when an attribute name is not one or more lowercase ASCII letters and
// digits, when an attribute other than an extension has the wrong JSON type, or when both
// data and data_base64 are present. A batch decoder refuses the whole batch for one bad
// event and names its index.
//
// # Caveats
//
// The data member is written after the attributes whatever its place in the input. JSON
// integer extensions are kept in canonical decimal form (1e2 becomes 100); a JSON number
// that is not a 32-bit integer is refused (the CloudEvents type system has no other
// number). Protobuf carries time and timestamp extensions as seconds and nanos, so protobuf
// output writes them in RFC 3339 UTC form. proto_data (google.protobuf.Any) is refused.
//
// Every decoder returns an error, never panics, on any input (fuzzed).
package cloudevents

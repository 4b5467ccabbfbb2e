package meta

import (
	"context"
	"errors"
)

// Stream schemas of arrow streams (encoding arrow). A stream's schema is versioned: version
// 1 is stored with the stream's creation (CreateArrowStream), each later version by
// PutSchema and must follow the evolution rules from the latest one (shared/arrowenc:
// only nullable columns may be added). Arrow chunks carry the version they were built
// with, so readers decode every chunk with its own schema. Bound: one entry per version,
// at most MaxSchemaVersions per stream, each at most arrowenc.MaxSchemaLen bytes.

// MaxSchemaVersions bounds the versions of one stream's schema.
const MaxSchemaVersions = 1000

// ErrSchemaNotFound: the stream has no schema of that version (or none at all).
var ErrSchemaNotFound = errors.New("meta: schema not found")

// StreamSchema is one version of a stream's schema, in its canonical JSON form.
type StreamSchema struct {
	StreamID  uint64
	Version   uint32
	Schema    []byte
	CreatedMs int64
}

// PutSchema asks for a new schema version of an existing arrow stream. ExpectVersion is
// the latest version the caller saw: a put that raced another is refused.
type PutSchema struct {
	Namespace     string
	Stream        string
	Schema        []byte
	ExpectVersion uint32
}

// SchemaClient stores and reads arrow streams' schemas. The sequencer's clients
// (metagrpc, the in-process servertest client) implement it besides Client.
type SchemaClient interface {
	// CreateArrowStream creates a stream of encoding arrow with schema version 1, in one
	// command: either both exist after it or neither.
	CreateArrowStream(ctx context.Context, c StreamConfig, schema []byte) (Stream, StreamSchema, error)
	// PutSchema stores the next version of a stream's schema. ErrInvalidArgument (with
	// the evolution rule broken) when it may not replace the latest.
	PutSchema(ctx context.Context, p PutSchema) (StreamSchema, error)
	// GetSchema reads one version of a stream's schema (0: the latest).
	// ErrSchemaNotFound when there is none.
	GetSchema(ctx context.Context, streamID uint64, version uint32) (StreamSchema, error)
}

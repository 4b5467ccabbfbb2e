package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Stream schemas of arrow streams (meta.StreamSchema). The bucket "stream_schemas" maps
// stream id (8 bytes) ‖ version (4 bytes), big-endian, to a metapb.StreamSchema. It is
// created by the first schema put, so databases without it read as "no schemas" and the
// format is unchanged. Deleting a stream deletes its schemas. Bound: at most
// meta.MaxSchemaVersions entries per stream, each at most arrowenc.MaxSchemaLen bytes.
var bSchemas = []byte("stream_schemas")

// CreateArrowStream is the command that creates an arrow stream with its first schema.
func CreateArrowStream(c meta.StreamConfig, schema []byte) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_Schema{Schema: &metapb.SchemaCmd{Op: &metapb.SchemaCmd_Put{Put: &metapb.PutSchemaCmd{
		Namespace: c.Namespace, Stream: c.Name, SchemaJson: schema, Create: true,
		Partitions: c.Partitions, Class: c.Class, RetentionMs: c.RetentionMs,
		RetentionBytes: c.RetentionBytes, CleanupPolicy: c.CleanupPolicy,
	}}}}}
}

// PutSchema is the command that stores a stream's next schema version.
func PutSchema(p meta.PutSchema) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_Schema{Schema: &metapb.SchemaCmd{Op: &metapb.SchemaCmd_Put{Put: &metapb.PutSchemaCmd{
		Namespace: p.Namespace, Stream: p.Stream, SchemaJson: p.Schema, ExpectVersion: p.ExpectVersion,
	}}}}}
}

func schemaKey(id uint64, v uint32) []byte {
	return binary.BigEndian.AppendUint32(u64(id), v)
}

func applySchemaInto(a *applier, c *metapb.SchemaCmd, res *Result) {
	switch op := c.GetOp().(type) {
	case *metapb.SchemaCmd_Put:
		res.Stream, res.Schema, res.Err = a.putSchema(op.Put)
	default:
		res.Err = fmt.Errorf("%w: schema command: unknown operation", ErrBadCommand)
	}
}

// putSchema applies a PutSchemaCmd. Nothing is changed when it fails.
func (a *applier) putSchema(c *metapb.PutSchemaCmd) (meta.Stream, meta.StreamSchema, error) {
	what := fmt.Sprintf("put schema of %s/%s", c.GetNamespace(), c.GetStream())
	fail := func(err error) (meta.Stream, meta.StreamSchema, error) {
		return meta.Stream{}, meta.StreamSchema{}, fmt.Errorf("%s: %w", what, err)
	}
	next, err := arrowenc.ParseSchema(c.GetSchemaJson())
	if err != nil {
		return fail(fmt.Errorf("%w: %v", meta.ErrInvalidArgument, err))
	}
	var s meta.Stream
	var version uint32 = 1
	if c.GetCreate() {
		if c.GetExpectVersion() != 0 {
			return fail(fmt.Errorf("%w: a create expects no earlier version", meta.ErrInvalidArgument))
		}
		cfg := meta.StreamConfig{Namespace: c.GetNamespace(), Name: c.GetStream(), Partitions: c.GetPartitions(),
			Class: c.GetClass(), RetentionMs: c.GetRetentionMs(), RetentionBytes: c.GetRetentionBytes(),
			CleanupPolicy: c.GetCleanupPolicy(), Encoding: meta.EncodingKafka}
		if cfg.CleanupPolicy == meta.CleanupCompact {
			return fail(fmt.Errorf("%w: cleanup policy compact is not supported for arrow streams yet", meta.ErrInvalidArgument))
		}
		if cfg, err = NormalizeConfig(cfg); err != nil {
			return fail(err)
		}
		if !a.nsExists(cfg.Namespace) {
			return fail(meta.ErrNamespaceNotFound)
		}
		if a.tx.Bucket(bStreams).Get(streamKey(cfg.Namespace, cfg.Name)) != nil {
			return fail(meta.ErrStreamExists)
		}
		// createStream normalizes again, and refuses arrow there: create as kafka, then
		// store the arrow encoding.
		cfg.Encoding = meta.EncodingKafka
		if s, err = a.createStream(cfg); err != nil {
			return fail(err)
		}
		s.Encoding = meta.EncodingArrow
		a.putStream(streamKey(s.Namespace, s.Name), s)
	} else {
		var err error
		if s, _, err = a.getStream(c.GetNamespace(), c.GetStream()); err != nil {
			return fail(err)
		}
		if s.Encoding != meta.EncodingArrow {
			return fail(fmt.Errorf("%w: the stream's encoding is %s, not arrow", meta.ErrInvalidArgument, s.Encoding))
		}
		latest, ok := a.latestSchema(s.ID)
		if !ok {
			return fail(fmt.Errorf("%w: the stream has no schema", meta.ErrSchemaNotFound))
		}
		if c.GetExpectVersion() != latest.Version {
			return fail(fmt.Errorf("%w: the latest schema version is %d, not %d", meta.ErrInvalidArgument, latest.Version, c.GetExpectVersion()))
		}
		if latest.Version >= meta.MaxSchemaVersions {
			return fail(fmt.Errorf("%w: the stream has %d schema versions, the limit", meta.ErrInvalidArgument, latest.Version))
		}
		prev, err := arrowenc.ParseSchema(latest.Schema)
		if err != nil {
			a.check(fmt.Errorf("fsm: stored schema of stream %d version %d: %w", s.ID, latest.Version, err))
		}
		if err := arrowenc.CheckEvolution(prev, next); err != nil {
			return fail(fmt.Errorf("%w: %v", meta.ErrInvalidArgument, err))
		}
		version = latest.Version + 1
	}
	b, err := a.tx.CreateBucketIfNotExists(bSchemas)
	a.check(err)
	out := meta.StreamSchema{StreamID: s.ID, Version: version, Schema: next.JSON(), CreatedMs: a.clock}
	v, err := proto.Marshal(fromSchema(out))
	a.check(err)
	a.check(b.Put(schemaKey(s.ID, version), v))
	return s, out, nil
}

// dropSchemas deletes a deleted stream's schemas.
func (a *applier) dropSchemas(id uint64) {
	b := a.tx.Bucket(bSchemas)
	if b == nil {
		return
	}
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(u64(id)); k != nil && bytes.HasPrefix(k, u64(id)); k, _ = c.Next() {
		keys = append(keys, append([]byte{}, k...))
	}
	for _, k := range keys {
		a.check(b.Delete(k))
	}
}

func (a *applier) latestSchema(id uint64) (meta.StreamSchema, bool) {
	s, err := readSchema(a.tx, id, 0)
	return s, err == nil
}

func fromSchema(s meta.StreamSchema) *metapb.StreamSchema {
	return &metapb.StreamSchema{StreamId: s.StreamID, Version: s.Version, SchemaJson: s.Schema, CreatedMs: s.CreatedMs}
}

// ToSchema converts a metapb.StreamSchema.
func ToSchema(p *metapb.StreamSchema) meta.StreamSchema {
	return meta.StreamSchema{StreamID: p.GetStreamId(), Version: p.GetVersion(), Schema: p.GetSchemaJson(), CreatedMs: p.GetCreatedMs()}
}

// readSchema reads version v (0: the latest) of stream id's schema.
func readSchema(tx *bolt.Tx, id uint64, v uint32) (meta.StreamSchema, error) {
	b := tx.Bucket(bSchemas)
	if b == nil {
		return meta.StreamSchema{}, fmt.Errorf("schema of stream %d: %w", id, meta.ErrSchemaNotFound)
	}
	var val []byte
	if v != 0 {
		val = b.Get(schemaKey(id, v))
	} else {
		c := b.Cursor()
		k, x := c.Seek(u64(id + 1))
		if k == nil {
			k, x = c.Last()
		} else {
			k, x = c.Prev()
		}
		if k != nil && bytes.HasPrefix(k, u64(id)) {
			val = x
		}
	}
	if val == nil {
		return meta.StreamSchema{}, fmt.Errorf("schema of stream %d version %d: %w", id, v, meta.ErrSchemaNotFound)
	}
	var p metapb.StreamSchema
	if err := proto.Unmarshal(val, &p); err != nil {
		return meta.StreamSchema{}, fmt.Errorf("fsm: decode schema of stream %d: %w", id, err)
	}
	return ToSchema(&p), nil
}

// GetSchema returns version v (0: the latest) of stream id's schema.
func (f *FSM) GetSchema(id uint64, v uint32) (meta.StreamSchema, error) {
	var s meta.StreamSchema
	err := f.view(func(tx *bolt.Tx) error {
		var err error
		s, err = readSchema(tx, id, v)
		return err
	})
	return s, err
}

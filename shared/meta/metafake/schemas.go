package metafake

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
)

// Arrow streams' schemas (meta.SchemaClient), with the sequencer's rules: version 1 is
// stored with the stream, each later version must follow arrowenc.CheckEvolution from the
// latest and name the latest as ExpectVersion, at most meta.MaxSchemaVersions per stream,
// stored in canonical JSON. Bound: those versions per stream.

// CreateArrowStream creates a stream of encoding arrow in "default" with schema version 1.
func (f *Meta) CreateArrowStream(ctx context.Context, c meta.StreamConfig, schema []byte) (meta.Stream, meta.StreamSchema, error) {
	what := fmt.Sprintf("put schema of %s/%s", c.Namespace, c.Name)
	s, err := arrowenc.ParseSchema(schema)
	if err != nil {
		return meta.Stream{}, meta.StreamSchema{}, fmt.Errorf("%s: %w: %v", what, meta.ErrInvalidArgument, err)
	}
	if c.CleanupPolicy == meta.CleanupCompact {
		return meta.Stream{}, meta.StreamSchema{}, fmt.Errorf("%s: %w: cleanup policy compact is not supported for arrow streams yet", what, meta.ErrInvalidArgument)
	}
	c.Encoding = meta.EncodingArrow
	st, err := f.CreateStream(ctx, c)
	if err != nil {
		return meta.Stream{}, meta.StreamSchema{}, fmt.Errorf("%s: %w", what, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := meta.StreamSchema{StreamID: st.ID, Version: 1, Schema: s.JSON(), CreatedMs: f.Now().UnixMilli()}
	if f.schemas == nil {
		f.schemas = map[uint64][]meta.StreamSchema{}
	}
	f.schemas[st.ID] = []meta.StreamSchema{out}
	return st, out, nil
}

// PutSchema stores the next version of an arrow stream's schema.
func (f *Meta) PutSchema(ctx context.Context, p meta.PutSchema) (meta.StreamSchema, error) {
	what := fmt.Sprintf("put schema of %s/%s", p.Namespace, p.Stream)
	fail := func(err error) (meta.StreamSchema, error) {
		return meta.StreamSchema{}, fmt.Errorf("%s: %w", what, err)
	}
	next, err := arrowenc.ParseSchema(p.Schema)
	if err != nil {
		return fail(fmt.Errorf("%w: %v", meta.ErrInvalidArgument, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var st *meta.Stream
	for i := range f.streams {
		if f.streams[i].Name == p.Stream && (p.Namespace == "" || p.Namespace == f.streams[i].Namespace) {
			st = &f.streams[i]
		}
	}
	switch {
	case st == nil:
		return fail(meta.ErrStreamNotFound)
	case st.Encoding != meta.EncodingArrow:
		return fail(fmt.Errorf("%w: the stream's encoding is %s, not arrow", meta.ErrInvalidArgument, st.Encoding))
	}
	vs := f.schemas[st.ID]
	if len(vs) == 0 {
		return fail(fmt.Errorf("%w: the stream has no schema", meta.ErrSchemaNotFound))
	}
	latest := vs[len(vs)-1]
	if p.ExpectVersion != latest.Version {
		return fail(fmt.Errorf("%w: the latest schema version is %d, not %d", meta.ErrInvalidArgument, latest.Version, p.ExpectVersion))
	}
	if latest.Version >= meta.MaxSchemaVersions {
		return fail(fmt.Errorf("%w: the stream has %d schema versions, the limit", meta.ErrInvalidArgument, latest.Version))
	}
	prev, err := arrowenc.ParseSchema(latest.Schema)
	if err != nil {
		return fail(fmt.Errorf("stored schema version %d: %w", latest.Version, err))
	}
	if err := arrowenc.CheckEvolution(prev, next); err != nil {
		return fail(fmt.Errorf("%w: %v", meta.ErrInvalidArgument, err))
	}
	out := meta.StreamSchema{StreamID: st.ID, Version: latest.Version + 1, Schema: next.JSON(), CreatedMs: f.Now().UnixMilli()}
	f.schemas[st.ID] = append(vs, out)
	return out, nil
}

// GetSchema reads version v (0: the latest) of stream id's schema.
func (f *Meta) GetSchema(ctx context.Context, id uint64, v uint32) (meta.StreamSchema, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := f.schemas[id]
	switch {
	case len(vs) > 0 && v == 0:
		return vs[len(vs)-1], nil
	case v >= 1 && int(v) <= len(vs):
		return vs[v-1], nil
	}
	return meta.StreamSchema{}, fmt.Errorf("schema of stream %d version %d: %w", id, v, meta.ErrSchemaNotFound)
}

var _ meta.SchemaClient = (*Meta)(nil)

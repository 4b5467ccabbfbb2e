package metagrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Arrow streams' schemas over loam.meta.v1.StreamSchemas (meta.SchemaClient). Puts are
// writes: not repeated once sent (a put's outcome is checked by its expected version, a
// create's by ErrStreamExists); GetSchema is a read.

func toSchema(p *metapb.StreamSchema) meta.StreamSchema {
	return meta.StreamSchema{StreamID: p.GetStreamId(), Version: p.GetVersion(), Schema: p.GetSchemaJson(), CreatedMs: p.GetCreatedMs()}
}

func (c *client) CreateArrowStream(ctx context.Context, cfg meta.StreamConfig, schema []byte) (meta.Stream, meta.StreamSchema, error) {
	var out meta.StreamSchema
	err := c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewStreamSchemasClient(cc).PutSchema(ctx, &metapb.PutSchemaRequest{Put: &metapb.PutSchemaCmd{
			Namespace: cfg.Namespace, Stream: cfg.Name, SchemaJson: schema, Create: true,
			Partitions: cfg.Partitions, Class: cfg.Class, RetentionMs: cfg.RetentionMs,
			RetentionBytes: cfg.RetentionBytes, CleanupPolicy: cfg.CleanupPolicy}})
		out = toSchema(r.GetSchema())
		return err
	})
	if err != nil {
		return meta.Stream{}, meta.StreamSchema{}, err
	}
	s, _, err := c.GetStream(ctx, cfg.Namespace, cfg.Name)
	return s, out, err
}

func (c *client) PutSchema(ctx context.Context, p meta.PutSchema) (meta.StreamSchema, error) {
	var out meta.StreamSchema
	err := c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewStreamSchemasClient(cc).PutSchema(ctx, &metapb.PutSchemaRequest{Put: &metapb.PutSchemaCmd{
			Namespace: p.Namespace, Stream: p.Stream, SchemaJson: p.Schema, ExpectVersion: p.ExpectVersion}})
		out = toSchema(r.GetSchema())
		return err
	})
	return out, err
}

func (c *client) GetSchema(ctx context.Context, id uint64, v uint32) (meta.StreamSchema, error) {
	var out meta.StreamSchema
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewStreamSchemasClient(cc).GetSchema(ctx, &metapb.GetSchemaRequest{StreamId: id, Version: v})
		out = toSchema(r.GetSchema())
		return err
	})
	return out, err
}

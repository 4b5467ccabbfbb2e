package metagrpc

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Deleting a named consumer and resetting its offsets: the loam.meta.v1.ConsumerAdmin
// service, over the connection of the Sequencer client each attempt picks.

func consumerAdminOf(s metapb.SequencerClient) (metapb.ConsumerAdminClient, error) {
	c, ok := metapb.ConsumerAdminOf(s)
	if !ok {
		return nil, fmt.Errorf("%w: no consumer admin service over this connection", meta.ErrUnavailable)
	}
	return c, nil
}

// DeleteConsumer is a write; a repeat after it applied answers ErrConsumerNotFound.
func (c *client) DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error {
	req := &metapb.DeleteConsumerRequest{Namespace: ns, Consumer: consumer, Force: force}
	return c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		cc, err := consumerAdminOf(s)
		if err != nil {
			return err
		}
		_, err = cc.DeleteConsumer(ctx, req)
		return err
	})
}

// ResetConsumerOffsets is a write; a repeat sets the same offsets again (earliest and
// latest as they are then).
func (c *client) ResetConsumerOffsets(ctx context.Context, r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
	var out []meta.ConsumerOffset
	req := metapb.FromConsumerReset(r)
	err := c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		cc, err := consumerAdminOf(s)
		if err != nil {
			return err
		}
		resp, err := cc.ResetConsumerOffsets(ctx, req)
		if err != nil {
			return err
		}
		out = metapb.ToResetOffsets(resp.GetOffsets())
		return nil
	})
	return out, err
}

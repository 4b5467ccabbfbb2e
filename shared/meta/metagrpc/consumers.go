package metagrpc

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Named consumers: the loam.meta.v1.Consumers service, reached over the connection of the
// Sequencer client each attempt picks (metapb.ConsumersOf).

func consumersOf(s metapb.SequencerClient) (metapb.ConsumersClient, error) {
	c, ok := metapb.ConsumersOf(s)
	if !ok {
		return nil, fmt.Errorf("%w: no consumers service over this connection", meta.ErrUnavailable)
	}
	return c, nil
}

// ConsumerHeartbeat is a write; a repeat renews again, which is harmless.
func (c *client) ConsumerHeartbeat(ctx context.Context, h meta.ConsumerHeartbeat) (meta.ConsumerAssignment, error) {
	var out meta.ConsumerAssignment
	req := &metapb.ConsumerHeartbeatRequest{Namespace: h.Namespace, Consumer: h.Consumer, Stream: h.Stream, Member: h.Member,
		SessionMs: h.Session.Milliseconds(), Leave: h.Leave}
	err := c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		cc, err := consumersOf(s)
		if err != nil {
			return err
		}
		r, err := cc.ConsumerHeartbeat(ctx, req)
		if err != nil {
			return err
		}
		out = metapb.ToConsumerAssignment(r)
		return nil
	})
	return out, err
}

// CommitConsumerOffsets is a write; a repeat commits the same offsets again.
func (c *client) CommitConsumerOffsets(ctx context.Context, cm meta.ConsumerCommit) error {
	req := metapb.FromConsumerCommit(cm)
	return c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		cc, err := consumersOf(s)
		if err != nil {
			return err
		}
		_, err = cc.CommitConsumerOffsets(ctx, req)
		return err
	})
}

func (c *client) DescribeConsumer(ctx context.Context, ns, consumer string) (meta.ConsumerState, error) {
	var out meta.ConsumerState
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		cc, err := consumersOf(s)
		if err != nil {
			return err
		}
		r, err := cc.DescribeConsumer(ctx, &metapb.DescribeConsumerRequest{Namespace: ns, Consumer: consumer})
		if err != nil {
			return err
		}
		out = metapb.ToConsumerState(r)
		return nil
	})
	return out, err
}

func (c *client) ListConsumers(ctx context.Context, ns string) ([]string, error) {
	var out []string
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		cc, err := consumersOf(s)
		if err != nil {
			return err
		}
		r, err := cc.ListConsumers(ctx, &metapb.ListConsumersRequest{Namespace: ns})
		if err != nil {
			return err
		}
		out = r.GetNames()
		return nil
	})
	return out, err
}

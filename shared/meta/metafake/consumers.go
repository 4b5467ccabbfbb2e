package metafake

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
)

// Named consumers are not implemented by the fake: every call is refused.

func errNoConsumers(what string) error {
	return fmt.Errorf("%w: %s: metafake implements no named consumers", meta.ErrInvalidArgument, what)
}

func (f *Meta) ConsumerHeartbeat(ctx context.Context, h meta.ConsumerHeartbeat) (meta.ConsumerAssignment, error) {
	return meta.ConsumerAssignment{}, errNoConsumers("consumer heartbeat")
}

func (f *Meta) CommitConsumerOffsets(ctx context.Context, c meta.ConsumerCommit) error {
	return errNoConsumers("commit consumer offsets")
}

func (f *Meta) DescribeConsumer(ctx context.Context, ns, consumer string) (meta.ConsumerState, error) {
	return meta.ConsumerState{}, errNoConsumers("describe consumer")
}

func (f *Meta) ListConsumers(ctx context.Context, ns string) ([]string, error) {
	return nil, errNoConsumers("list consumers")
}

func (f *Meta) DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error {
	return errNoConsumers("delete consumer")
}

func (f *Meta) ResetConsumerOffsets(ctx context.Context, r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
	return nil, errNoConsumers("reset consumer offsets")
}

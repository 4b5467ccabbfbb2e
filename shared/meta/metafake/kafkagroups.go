package metafake

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
)

// Kafka consumer groups are not implemented by the fake: every call is refused (tests of
// the group coordinator run the real sequencer, sequencer-svc/server/servertest).

func errNoKafkaGroups(what string) error {
	return fmt.Errorf("%w: %s: metafake implements no kafka groups", meta.ErrInvalidArgument, what)
}

func (f *Meta) AdvanceKafkaGroup(ctx context.Context, ns, group string, epoch uint64, protocolType string) (meta.KafkaGroupGeneration, error) {
	return meta.KafkaGroupGeneration{}, errNoKafkaGroups("advance kafka group")
}

func (f *Meta) CommitKafkaOffsets(ctx context.Context, c meta.KafkaOffsetCommit) error {
	return errNoKafkaGroups("commit kafka offsets")
}

func (f *Meta) DeleteKafkaOffsets(ctx context.Context, ns, group string, epoch uint64, parts []meta.KafkaTopicPartition) error {
	return errNoKafkaGroups("delete kafka offsets")
}

func (f *Meta) DeleteKafkaGroup(ctx context.Context, ns, group string, epoch uint64) error {
	return errNoKafkaGroups("delete kafka group")
}

func (f *Meta) DescribeKafkaGroup(ctx context.Context, ns, group string) (meta.KafkaGroupState, error) {
	return meta.KafkaGroupState{}, errNoKafkaGroups("describe kafka group")
}

func (f *Meta) ListKafkaGroups(ctx context.Context, ns string) ([]meta.KafkaGroupState, error) {
	return nil, errNoKafkaGroups("list kafka groups")
}

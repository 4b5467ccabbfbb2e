package metagrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Kafka consumer groups over loam.meta.v1.KafkaGroups. The writes are fenced by the group's
// epoch, so they are not repeated once sent: a repeat of an AdvanceKafkaGroup that was
// applied would advance twice, and the caller (the group coordinator) handles an unknown
// outcome by claiming the group again. Describe and List are reads.

func (c *client) AdvanceKafkaGroup(ctx context.Context, ns, group string, epoch uint64, protocolType string) (meta.KafkaGroupGeneration, error) {
	var out meta.KafkaGroupGeneration
	err := c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewKafkaGroupsClient(cc).AdvanceKafkaGroup(ctx, &metapb.AdvanceKafkaGroupRequest{Namespace: ns, Group: group,
			Epoch: epoch, ProtocolType: protocolType})
		if err != nil {
			return err
		}
		out = meta.KafkaGroupGeneration{Generation: r.GetGeneration(), Epoch: r.GetEpoch()}
		return nil
	})
	return out, err
}

func (c *client) CommitKafkaOffsets(ctx context.Context, cm meta.KafkaOffsetCommit) error {
	req := metapb.FromKafkaOffsetCommit(cm)
	return c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewKafkaGroupsClient(cc).CommitKafkaOffsets(ctx, req)
		return err
	})
}

func (c *client) DeleteKafkaOffsets(ctx context.Context, ns, group string, epoch uint64, parts []meta.KafkaTopicPartition) error {
	req := &metapb.DeleteKafkaOffsetsRequest{Namespace: ns, Group: group, Epoch: epoch, Partitions: metapb.FromKafkaTopicPartitions(parts)}
	return c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewKafkaGroupsClient(cc).DeleteKafkaOffsets(ctx, req)
		return err
	})
}

func (c *client) DeleteKafkaGroup(ctx context.Context, ns, group string, epoch uint64) error {
	req := &metapb.DeleteKafkaGroupRequest{Namespace: ns, Group: group, Epoch: epoch}
	return c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewKafkaGroupsClient(cc).DeleteKafkaGroup(ctx, req)
		return err
	})
}

func (c *client) DescribeKafkaGroup(ctx context.Context, ns, group string) (meta.KafkaGroupState, error) {
	var out meta.KafkaGroupState
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewKafkaGroupsClient(cc).DescribeKafkaGroup(ctx, &metapb.DescribeKafkaGroupRequest{Namespace: ns, Group: group})
		if err != nil {
			return err
		}
		out = metapb.ToKafkaGroupState(r)
		return nil
	})
	return out, err
}

func (c *client) ListKafkaGroups(ctx context.Context, ns string) ([]meta.KafkaGroupState, error) {
	var out []meta.KafkaGroupState
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewKafkaGroupsClient(cc).ListKafkaGroups(ctx, &metapb.ListKafkaGroupsRequest{Namespace: ns})
		if err != nil {
			return err
		}
		out = make([]meta.KafkaGroupState, len(r.GetGroups()))
		for i, g := range r.GetGroups() {
			out[i] = metapb.ToKafkaGroupState(g)
		}
		return nil
	})
	return out, err
}

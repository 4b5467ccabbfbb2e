package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/shared/meta"
)

// CreateTopics: versions 2-7.
//
// Behaviour: each topic becomes a stream of the connection's namespace, class standard,
// encoding kafka, with NumPartitions partitions (-1: 1) and the configs retention.ms,
// retention.bytes, cleanup.policy and max.message.bytes (any other config: INVALID_CONFIG). An existing
// topic answers TOPIC_ALREADY_EXISTS, a bad name INVALID_TOPIC_EXCEPTION, a partition
// count outside 1..10000 INVALID_PARTITIONS. ValidateOnly checks without creating.
// v5+ answers the partitions, replication factor 1 and the configs.
//
// Ignored: ReplicationFactor (durability is the bucket's; any value is accepted),
// ReplicaAssignment (leaderless: refused INVALID_REPLICA_ASSIGNMENT when given),
// TimeoutMillis.
const (
	createTopicsMin = 2
	createTopicsMax = 7
)

func (c *conn) createTopics(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	created := false
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		st, ecode, err := c.createTopic(ctx, t, req.ValidateOnly)
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = ecode, msg(err)
		} else {
			created = created || !req.ValidateOnly
			rt.TopicID = topicID(st.Namespace, st.ID)
			rt.NumPartitions, rt.ReplicationFactor = st.Partitions, 1
			for _, tc := range configsOf(st, c.s.cfg.Limits.MaxRecordBytes) {
				cc := kmsg.NewCreateTopicsResponseTopicConfig()
				v := tc.value
				cc.Name, cc.Value = tc.name, &v
				cc.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
				if tc.isDefault {
					cc.Source = int8(kmsg.ConfigSourceDefaultConfig)
				}
				rt.Configs = append(rt.Configs, cc)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if created {
		c.s.cfg.Streams.StreamsChanged()
	}
	return resp, nil
}

func (c *conn) createTopic(ctx context.Context, t kmsg.CreateTopicsRequestTopic, validateOnly bool) (meta.Stream, int16, error) {
	cfg := meta.StreamConfig{Namespace: c.ns, Name: t.Topic, Partitions: t.NumPartitions, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: defaultRetentionMs, RetentionBytes: defaultRetentionBytes, CleanupPolicy: defaultCleanupPolicy}
	if cfg.Partitions == -1 {
		cfg.Partitions = 1
	}
	switch {
	case t.Topic == group.OffsetsTopic:
		return meta.Stream{}, kerr.TopicAlreadyExists.Code, fmt.Errorf("%s is Kafka's internal topic of committed offsets, which Loam keeps in the sequencer", t.Topic)
	case !validTopic(t.Topic):
		return meta.Stream{}, kerr.InvalidTopicException.Code, fmt.Errorf("topic name %q: want 1-249 of [a-zA-Z0-9._-], not . or ..", t.Topic)
	case len(t.ReplicaAssignment) > 0:
		return meta.Stream{}, kerr.InvalidReplicaAssignment.Code, errors.New("replica assignments are not served: every node serves every partition")
	case cfg.Partitions < 1 || cfg.Partitions > meta.MaxPartitions:
		return meta.Stream{}, kerr.InvalidPartitions.Code, fmt.Errorf("%d partitions: want 1..%d", t.NumPartitions, meta.MaxPartitions)
	}
	var patch meta.StreamPatch
	for _, kc := range t.Configs {
		if err := setConfig(&patch, kc.Name, kc.Value); err != nil {
			return meta.Stream{}, kerr.InvalidConfig.Code, err
		}
	}
	applyPatch(&cfg, patch)
	if validateOnly {
		if _, err := c.s.cfg.Streams.Stream(ctx, c.ns, t.Topic); err == nil {
			return meta.Stream{}, kerr.TopicAlreadyExists.Code, fmt.Errorf("topic %q already exists", t.Topic)
		}
		return meta.Stream{StreamConfig: cfg}, 0, nil
	}
	st, err := c.s.cfg.Meta.CreateStream(ctx, cfg)
	switch {
	case errors.Is(err, meta.ErrStreamExists):
		return meta.Stream{}, kerr.TopicAlreadyExists.Code, fmt.Errorf("topic %q already exists", t.Topic)
	case errors.Is(err, meta.ErrNamespaceNotFound):
		return meta.Stream{}, kerr.InvalidRequest.Code, fmt.Errorf("namespace %q does not exist", c.ns)
	case errors.Is(err, meta.ErrInvalidArgument):
		return meta.Stream{}, kerr.InvalidRequest.Code, err
	case err != nil:
		return meta.Stream{}, code(err), err
	}
	return st, 0, nil
}

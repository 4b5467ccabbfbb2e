package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// CreatePartitions: versions 0-3.
//
// Behaviour: a topic grows to Count partitions (the stream's partitions may only grow: a
// smaller or equal count answers INVALID_PARTITIONS). ValidateOnly checks without
// changing.
//
// Ignored: Assignment (leaderless: refused INVALID_REPLICA_ASSIGNMENT when given),
// TimeoutMillis.
const (
	createPartitionsMin = 0
	createPartitionsMax = 3
)

func (c *conn) createPartitions(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	changed := false
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		err := func() error {
			if len(t.Assignment) > 0 {
				rt.ErrorCode = kerr.InvalidReplicaAssignment.Code
				return errors.New("replica assignments are not served: every node serves every partition")
			}
			st, err := c.s.cfg.Streams.Stream(ctx, c.ns, t.Topic)
			if err != nil {
				rt.ErrorCode = code(err)
				return err
			}
			if t.Count <= st.Partitions || t.Count > meta.MaxPartitions {
				rt.ErrorCode = kerr.InvalidPartitions.Code
				return fmt.Errorf("topic %q has %d partitions: the count may only grow, up to %d (asked %d)", t.Topic, st.Partitions, meta.MaxPartitions, t.Count)
			}
			if req.ValidateOnly {
				return nil
			}
			count := t.Count
			if _, err := c.s.cfg.Meta.UpdateStream(ctx, c.ns, t.Topic, meta.StreamPatch{Partitions: &count}); err != nil {
				rt.ErrorCode = code(err)
				if errors.Is(err, meta.ErrInvalidArgument) {
					rt.ErrorCode = kerr.InvalidPartitions.Code
				}
				return err
			}
			changed = true
			return nil
		}()
		rt.ErrorMessage = msg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	if changed {
		c.s.cfg.Streams.StreamsChanged()
	}
	return resp, nil
}

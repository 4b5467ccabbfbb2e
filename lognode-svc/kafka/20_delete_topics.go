package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
)

// DeleteTopics: versions 1-6.
//
// Behaviour: each named topic's stream is deleted (its data goes with retention and GC);
// a missing one answers UNKNOWN_TOPIC_OR_PARTITION. v6 topics named by id alone answer
// UNKNOWN_TOPIC_ID (ids are not resolved).
//
// Ignored: TimeoutMillis.
const (
	deleteTopicsMin = 1
	deleteTopicsMax = 6
)

func (c *conn) deleteTopics(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := req.TopicNames
	type ask struct {
		name *string
		id   [16]byte
	}
	var asks []ask
	for _, n := range names {
		asks = append(asks, ask{name: &n})
	}
	for _, t := range req.Topics {
		asks = append(asks, ask{name: t.Topic, id: t.TopicID})
	}
	deleted := false
	for _, a := range asks {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = a.name, a.id
		if a.name == nil {
			rt.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if _, internal := group.InternalStream(c.ns, *a.name); internal {
			rt.ErrorCode = kerr.InvalidTopicException.Code
			m := "cannot delete the internal topic " + *a.name
			rt.ErrorMessage = &m
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		st, err := c.s.cfg.Streams.Stream(ctx, c.ns, *a.name)
		if err == nil {
			rt.TopicID = topicID(st.Namespace, st.ID)
			err = c.s.cfg.Meta.DeleteStream(ctx, c.ns, *a.name)
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = code(err), msg(err)
		} else {
			deleted = true
			c.s.cfg.Reader.Forget(st.ID)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if deleted {
		c.s.cfg.Streams.StreamsChanged()
	}
	return resp, nil
}

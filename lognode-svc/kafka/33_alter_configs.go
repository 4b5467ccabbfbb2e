package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// AlterConfigs: versions 0-2.
//
// Behaviour: a topic's configs are replaced as a whole, as Kafka's AlterConfigs does:
// retention.ms, retention.bytes, cleanup.policy and max.message.bytes take the values given
// and those not given go back to their defaults. A config not served answers INVALID_CONFIG naming it,
// and nothing of that resource changes. ValidateOnly checks without changing. Broker
// resources answer INVALID_REQUEST (no broker settings).
const (
	alterConfigsMin = 0
	alterConfigsMax = 2
)

func errUnservedResource(t kmsg.ConfigResourceType) error {
	return fmt.Errorf("config resource type %v is not served: only topics are", t)
}

func (c *conn) alterConfigs(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := func() error {
			if res.ResourceType != kmsg.ConfigResourceTypeTopic {
				rr.ErrorCode = kerr.InvalidRequest.Code
				return errUnservedResource(res.ResourceType)
			}
			var patch meta.StreamPatch
			for _, name := range topicConfigNames { // the whole set: unnamed ones reset
				if err := setConfig(&patch, name, nil); err != nil {
					return err
				}
			}
			for _, kc := range res.Configs {
				if err := setConfig(&patch, kc.Name, kc.Value); err != nil {
					rr.ErrorCode = kerr.InvalidConfig.Code
					return err
				}
			}
			return c.patchTopic(ctx, res.ResourceName, patch, req.ValidateOnly, &rr.ErrorCode)
		}()
		rr.ErrorMessage = msg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// patchTopic applies a config patch to a topic (or, validateOnly, checks it exists),
// setting *ecode on failure.
func (c *conn) patchTopic(ctx context.Context, topic string, patch meta.StreamPatch, validateOnly bool, ecode *int16) error {
	if _, err := c.s.cfg.Streams.Stream(ctx, c.ns, topic); err != nil {
		*ecode = code(err)
		return err
	}
	if validateOnly {
		return nil
	}
	if _, err := c.s.cfg.Meta.UpdateStream(ctx, c.ns, topic, patch); err != nil {
		*ecode = code(err)
		if errors.Is(err, meta.ErrInvalidArgument) {
			*ecode = kerr.InvalidConfig.Code
		}
		return err
	}
	c.s.cfg.Streams.StreamsChanged()
	return nil
}

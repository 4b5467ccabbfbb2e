package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// IncrementalAlterConfigs: versions 0-1.
//
// Behaviour: on a topic, SET sets retention.ms, retention.bytes, cleanup.policy or
// max.message.bytes and
// DELETE resets one to its default; the others stay. APPEND and SUBTRACT, and configs not
// served, answer INVALID_CONFIG naming them, and nothing of that resource changes.
// ValidateOnly checks without changing. Broker resources answer INVALID_REQUEST.
const (
	incrementalAlterConfigsMin = 0
	incrementalAlterConfigsMax = 1
)

func (c *conn) incrementalAlterConfigs(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := func() error {
			if res.ResourceType != kmsg.ConfigResourceTypeTopic {
				rr.ErrorCode = kerr.InvalidRequest.Code
				return errUnservedResource(res.ResourceType)
			}
			var patch meta.StreamPatch
			for _, kc := range res.Configs {
				var err error
				switch kc.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					if kc.Value == nil {
						err = fmt.Errorf("SET %s needs a value", kc.Name)
					} else {
						err = setConfig(&patch, kc.Name, kc.Value)
					}
				case kmsg.IncrementalAlterConfigOpDelete:
					err = setConfig(&patch, kc.Name, nil)
				default:
					err = fmt.Errorf("operation %v on %s is not served: only SET and DELETE are", kc.Op, kc.Name)
				}
				if err != nil {
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

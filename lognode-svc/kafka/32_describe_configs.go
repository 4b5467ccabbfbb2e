package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: versions 0-4.
//
// Behaviour: a topic resource answers retention.ms, retention.bytes, cleanup.policy and
// max.message.bytes (the node's record limit when the topic has none of its own; those of ConfigNames when it names some; a name not served is left out, as brokers
// leave out unknown names), each with whether it is the default. A broker resource
// answers no configs (there are no broker settings to show). Other resource types answer
// INVALID_REQUEST.
//
// Ignored: IncludeSynonyms, IncludeDocumentation.
const (
	describeConfigsMin = 0
	describeConfigsMax = 4
)

func (c *conn) describeConfigs(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		switch res.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			st, err := c.s.cfg.Streams.Stream(ctx, c.ns, res.ResourceName)
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = code(err), msg(err)
				break
			}
			for _, tc := range configsOf(st, c.s.cfg.Limits.MaxRecordBytes) {
				if res.ConfigNames != nil && !slices.Contains(res.ConfigNames, tc.name) {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				v := tc.value
				rc.Name, rc.Value, rc.IsDefault = tc.name, &v, tc.isDefault
				rc.Source = kmsg.ConfigSourceDynamicTopicConfig
				if tc.isDefault {
					rc.Source = kmsg.ConfigSourceDefaultConfig
				}
				rc.ConfigType = kmsg.ConfigTypeLong
				switch tc.name {
				case cfgCleanupPolicy:
					rc.ConfigType = kmsg.ConfigTypeList
				case cfgMaxMessageBytes:
					rc.ConfigType = kmsg.ConfigTypeInt
				}
				rr.Configs = append(rr.Configs, rc)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = msg(errUnservedResource(res.ResourceType))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

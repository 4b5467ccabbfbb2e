package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: versions 0-2.
//
// Behaviour: the brokers Metadata names for the client (brokers.go), this node as the
// controller (the first broker behind an advertised listener), cluster id "loam". v1's
// EndpointType 2 (controllers) answers UNSUPPORTED_ENDPOINT_TYPE: there are no Kafka
// controllers to reach.
//
// Ignored: IncludeClusterAuthorizedOperations (answered -2147483648), IncludeFencedBrokers.
const (
	describeClusterMin = 0
	describeClusterMax = 2
)

func (c *conn) describeCluster(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType == 2 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = ClusterID
	bs := c.s.brokers(ctx, zoneOf(r.clientID))
	resp.ControllerID = bs[0].id
	if self := c.s.selfBroker().id; hasBroker(bs, self) {
		resp.ControllerID = self
	}
	for _, b := range bs {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.id, b.host, b.port, b.rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}

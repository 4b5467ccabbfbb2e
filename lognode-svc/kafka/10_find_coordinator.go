package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: versions 0-6, served only with a group handler (Config.Groups).
//
// Behaviour: a group's coordinator is the rendezvous owner of (namespace, group) among
// the live log nodes, or the advertised listener when one is set (the node a request then
// lands on forwards it to the owner: groups.go). v4+ answers each key of the batch.
// Transaction coordinators (CoordinatorType 1) answer COORDINATOR_NOT_AVAILABLE:
// transactions are not served.
//
// Ignored: nothing.
const (
	findCoordinatorMin = 0
	findCoordinatorMax = 6
)

func (c *conn) findCoordinator(ctx context.Context, r request) (kmsg.Response, error) {
	if c.s.cfg.Groups == nil {
		return nil, closeConn("FindCoordinator: consumer groups are not served by this node")
	}
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = k
		if req.CoordinatorType != 0 {
			co.ErrorCode = kerr.CoordinatorNotAvailable.Code
			co.ErrorMessage = msg(errors.New("transactions are not served: there is no transaction coordinator"))
			co.NodeID = -1
		} else {
			b := c.s.coordinator(ctx, c.ns, k)
			co.NodeID, co.Host, co.Port = b.id, b.host, b.port
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if req.Version < 4 {
		co := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
	}
	return resp, nil
}

// coordinator is the broker a client is told coordinates group of ns.
func (s *Server) coordinator(ctx context.Context, ns, group string) broker {
	if s.cfg.Advertised != "" {
		return s.brokers(ctx, "")[0]
	}
	n := s.owner(ctx, groupKey(ns, group))
	host, port, _ := splitHostPort(n.KafkaAddr)
	return broker{id: brokerID(n.ID), node: n.ID, host: host, port: port}
}

func groupKey(ns, group string) string { return "group\x00" + ns + "\x00" + group }

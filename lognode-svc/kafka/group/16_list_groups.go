package group

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5
//
// Behavior:
// * Lists the groups of the namespace that this node coordinates: those the sequencer
//   keeps (Empty unless held here with members) and those held here. Every node answers
//   its own share, as brokers do; a client listing every node sees each group once.
// * v4: StatesFilter (case-insensitive state names); v5: TypesFilter ("classic" or
//   "consumer").
// * Errors: COORDINATOR_NOT_AVAILABLE (the sequencer did not answer).
//
// Version notes:
// * v4: GroupState
// * v5: GroupType

func (c *Coordinator) listGroups(ctx context.Context, ns string, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	stored, err := c.cfg.Meta.ListKafkaGroups(ctx, ns)
	if err != nil {
		c.log.Warn("kafka group: list", "ns", ns, "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	type row struct{ ptype, state, gtype string }
	rows := map[string]row{}
	for _, s := range stored {
		rows[s.Group] = row{s.ProtocolType, stEmpty.String(), kindClassic.String()}
	}
	c.mu.Lock()
	var held []*group
	for k, g := range c.groups {
		if k.ns == ns {
			held = append(held, g)
		}
	}
	c.mu.Unlock()
	for _, g := range held {
		g.mu.Lock()
		if !g.dead && g.loaded {
			r := row{"consumer", g.state.String(), g.kind.String()}
			if g.kind == kindClassic && g.protocolType != "" {
				r.ptype = g.protocolType
			}
			if g.kind == kindConsumer && g.cg != nil {
				r.state = g.cg.state(g).String()
			}
			if g.idle() {
				r.state = stEmpty.String()
			}
			rows[g.id] = r
		}
		g.mu.Unlock()
	}
	for _, id := range sortedKeys(rows) {
		r := rows[id]
		if !c.owns(ns, id) {
			continue
		}
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, r.state) }) {
			continue
		}
		if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(s, r.gtype) }) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, r.ptype, r.state, r.gtype
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(mapsKeys(m))
}

package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2
//
// Behavior:
// * Deletes groups without members, and their committed offsets, from the sequencer
//   (fenced by the group's epoch; a group only the sequencer knows is claimed first).
// * Errors per group: NON_EMPTY_GROUP (members remain), GROUP_ID_NOT_FOUND, INVALID_GROUP_ID,
//   NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT.

func (c *Coordinator) deleteGroups(ctx context.Context, ns string, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group, dg.ErrorCode = id, c.deleteGroup(ctx, ns, id)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, ns, id string) int16 {
	if id == "" {
		return kerr.InvalidGroupID.Code
	}
	if g, code := c.acquire(ns, id, false); code != 0 {
		return code
	} else if g == nil {
		// Not held here: only the sequencer can know it.
		if _, err := c.cfg.Meta.DescribeKafkaGroup(ctx, ns, id); isNotFound(err) {
			return kerr.GroupIDNotFound.Code
		} else if err != nil {
			return kerr.CoordinatorNotAvailable.Code
		}
	} else {
		g.mu.Unlock()
	}
	g, code := c.acquire(ns, id, true)
	if g == nil {
		return code
	}
	defer g.mu.Unlock()
	if !g.idle() {
		return kerr.NonEmptyGroup.Code
	}
	if code := g.load(ctx); code != 0 {
		return code
	}
	err := c.cfg.Meta.DeleteKafkaGroup(ctx, ns, id, g.epoch)
	code, lost := metaCode(err)
	if lost {
		g.lose()
		return code
	}
	if err != nil {
		g.loaded = false
		return code
	}
	g.state = stDead
	g.drop(kerr.GroupIDNotFound.Code)
	go c.forget(g)
	return 0
}

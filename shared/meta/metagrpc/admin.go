package metagrpc

import (
	"context"

	"github.com/loamhq/loam/shared/meta/metapb"
)

// Request and response headers of the Sequencer service's routing.
const (
	// ForwardedHeader marks a request a voter forwarded to the leader (its value is the
	// forwarding voter's id); the receiver never forwards it again.
	ForwardedHeader = "x-loam-forwarded"
	// LeaderHeader is the response header of a call a follower forwarded: the leader's RPC
	// address. The client then sends its calls there directly.
	LeaderHeader = "x-loam-leader"
)

// Admin is the membership API of the sequencer group; the client Dial returns implements
// it (c.(metagrpc.Admin)). Every call may be sent to any voter (followers forward to the
// leader) and is resent after meta.ErrUnavailable, since repeating one changes nothing
// more.
type Admin interface {
	// AddVoter adds server id (Raft address raftAddr) as a voter, or promotes the
	// non-voter id; it returns once the configuration change is committed.
	AddVoter(ctx context.Context, id, raftAddr string) error
	// AddNonvoter adds server id as a non-voter: replicated to, not counted in quorums.
	// It never demotes a voter.
	AddNonvoter(ctx context.Context, id, raftAddr string) error
	// RemoveServer removes server id from the group; an id not in it is nothing to do.
	RemoveServer(ctx context.Context, id string) error
	// Members lists the servers as the answering voter's configuration has it.
	Members(ctx context.Context) ([]Member, error)
	// ReadIndex returns the leader's read index: every write acknowledged before the call
	// is at or below it.
	ReadIndex(ctx context.Context) (uint64, error)
}

// Member is one server of the sequencer's Raft group.
type Member struct {
	ID       string
	RaftAddr string
	RPCAddr  string // registered when the server led; "" if it never has
	Voter    bool
	Leader   bool
}

var _ Admin = (*client)(nil)

func (c *client) AddVoter(ctx context.Context, id, raftAddr string) error {
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.AddVoter(ctx, &metapb.AddVoterRequest{Id: id, RaftAddr: raftAddr})
		return err
	})
}

func (c *client) AddNonvoter(ctx context.Context, id, raftAddr string) error {
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.AddVoter(ctx, &metapb.AddVoterRequest{Id: id, RaftAddr: raftAddr, Nonvoter: true})
		return err
	})
}

func (c *client) RemoveServer(ctx context.Context, id string) error {
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.RemoveServer(ctx, &metapb.RemoveServerRequest{Id: id})
		return err
	})
}

func (c *client) Members(ctx context.Context) ([]Member, error) {
	var out []Member
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.Members(ctx, &metapb.MembersRequest{})
		if err != nil {
			return err
		}
		out = nil
		for _, m := range r.GetMembers() {
			out = append(out, Member{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), RPCAddr: m.GetRpcAddr(), Voter: m.GetVoter(), Leader: m.GetLeader()})
		}
		return nil
	})
	return out, err
}

func (c *client) ReadIndex(ctx context.Context) (uint64, error) {
	var out uint64
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.ReadIndex(ctx, &metapb.ReadIndexRequest{})
		out = r.GetIndex()
		return err
	})
	return out, err
}

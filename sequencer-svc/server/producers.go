package server

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// InitProducer allocates or bumps an idempotent producer (meta.Client.InitProducer) under
// the configured per-namespace cap.
func (n *Node) InitProducer(ctx context.Context, ns, name string, id int64, epoch int16) (meta.Producer, error) {
	if err := meta.CheckProducerRequest(ns, name, id, epoch); err != nil {
		return meta.Producer{}, err
	}
	res, err := n.propose(ctx, fsm.InitProducer(ns, name, id, epoch, n.cfg.MaxProducers))
	if err != nil {
		return meta.Producer{}, err
	}
	if res.Err != nil {
		return meta.Producer{}, res.Err
	}
	return res.Producer, nil
}

func (s *service) InitProducer(ctx context.Context, r *metapb.InitProducerRequest) (*metapb.InitProducerResponse, error) {
	return write(ctx, s.n, r, s.initProducer, metapb.SequencerClient.InitProducer)
}

func (s *service) initProducer(ctx context.Context, r *metapb.InitProducerRequest) (*metapb.InitProducerResponse, error) {
	if r.GetEpoch() < -1<<15 || r.GetEpoch() >= 1<<15 {
		return nil, metaInvalidEpoch(r.GetEpoch())
	}
	p, err := s.n.InitProducer(ctx, r.GetNamespace(), r.GetName(), r.GetProducerId(), int16(r.GetEpoch()))
	if err != nil {
		return nil, err
	}
	return &metapb.InitProducerResponse{ProducerId: p.ID, Epoch: int32(p.Epoch)}, nil
}

func (c localClient) InitProducer(ctx context.Context, ns, name string, id int64, epoch int16) (meta.Producer, error) {
	if c.n.IsLeader() {
		if p, err := c.n.InitProducer(ctx, ns, name, id, epoch); direct(err) {
			return p, err
		}
	}
	r, err := routeWrite(ctx, c.n, &metapb.InitProducerRequest{Namespace: ns, Name: name, ProducerId: id, Epoch: int32(epoch)},
		c.s.initProducer, metapb.SequencerClient.InitProducer)
	if err != nil {
		return meta.Producer{}, err
	}
	return meta.Producer{ID: r.GetProducerId(), Epoch: metapb.Epoch16(r.GetEpoch())}, nil
}

func metaInvalidEpoch(e int32) error {
	return fmt.Errorf("%w: init producer: epoch %d is not an int16", meta.ErrInvalidArgument, e)
}

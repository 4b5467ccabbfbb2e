package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// InitProducerId: versions 0-5.
//
// Behaviour: allocates an idempotent producer of the connection's namespace through the
// sequencer (meta.Client.InitProducer), the same ids and epochs the native API hands
// out, so the sequencer's dedupe of Produce applies unchanged. v3+ ProducerID and
// ProducerEpoch (KIP-360) bump the epoch of a known producer; an epoch the sequencer never
// issued (a client's local bump after a refused batch) gets a new producer id, as Kafka
// gives an idempotent producer; an older epoch answers INVALID_PRODUCER_EPOCH (PRODUCER_FENCED from v4 on is not used: the same meaning). A
// transactional id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED: transactions are not
// served.
//
// Ignored: TransactionTimeoutMillis.
const (
	initProducerIDMin = 0
	initProducerIDMax = 5
)

func (c *conn) initProducerID(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	id, epoch := int64(meta.NoProducer), int16(-1)
	if req.Version >= 3 && req.ProducerID >= 0 {
		id, epoch = req.ProducerID, req.ProducerEpoch
		if id == 0 || epoch < 0 {
			id, epoch = meta.NoProducer, -1
		}
	}
	p, err := c.s.cfg.Meta.InitProducer(ctx, c.ns, "", id, epoch)
	if errors.Is(err, meta.ErrUnknownProducer) && id != meta.NoProducer {
		// An epoch never issued: the client bumped it locally after a refused batch
		// (KIP-360), and the sequencer does not take such bumps. Kafka allocates an
		// idempotent producer a new id whatever it presents: so does the gateway.
		p, err = c.s.cfg.Meta.InitProducer(ctx, c.ns, "", meta.NoProducer, -1)
	}
	switch {
	case errors.Is(err, meta.ErrProducerFenced):
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
	case errors.Is(err, meta.ErrNamespaceNotFound):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case err != nil:
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code // retriable: the sequencer could not answer
		if !errors.Is(err, meta.ErrUnavailable) && !errors.Is(err, meta.ErrNotLeader) {
			resp.ErrorCode = code(err)
		}
	default:
		resp.ProducerID, resp.ProducerEpoch = p.ID, p.Epoch
		c.s.issued.add(p.ID, c.ns)
	}
	return resp, nil
}

package metagrpc

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// The CloudEvents dedup ledger over loam.meta.v1.EventLedger. Every call is idempotent
// under its claim id (a repeated claim answers the same, a repeated complete or release
// changes nothing more), so each is repeated like a read.

func init() {
	reasons = append(reasons, struct {
		err    error
		reason string
		code   codes.Code
	}{meta.ErrEventLedgerFull, "EVENT_LEDGER_FULL", codes.ResourceExhausted})
}

func (c *client) ClaimEvents(ctx context.Context, cl meta.EventClaim) ([]meta.EventClaimAnswer, error) {
	var out []meta.EventClaimAnswer
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewEventLedgerClient(cc).ClaimEvents(ctx, metapb.FromEventClaim(cl))
		out = metapb.ToEventAnswers(r)
		return err
	})
	if err != nil && errors.Is(err, meta.ErrEventLedgerFull) {
		// Keep the namespace and cap the server named.
		return nil, &ledgerFull{msg: err.Error(), full: meta.EventLedgerFullError{Namespace: cl.Namespace, Max: cl.MaxEntries}}
	}
	return out, err
}

// ledgerFull is ErrEventLedgerFull after a gRPC hop: the server's text, the claim's
// namespace and cap.
type ledgerFull struct {
	msg  string
	full meta.EventLedgerFullError
}

func (e *ledgerFull) Error() string { return strings.TrimSpace(e.msg) }
func (e *ledgerFull) Unwrap() error { return &e.full }

func (c *client) CompleteEvents(ctx context.Context, cc meta.EventComplete) error {
	return c.doCC(ctx, read, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		_, err := metapb.NewEventLedgerClient(conn).CompleteEvents(ctx, metapb.FromEventComplete(cc))
		return err
	})
}

func (c *client) ReleaseEvents(ctx context.Context, r meta.EventRelease) error {
	return c.doCC(ctx, read, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		_, err := metapb.NewEventLedgerClient(conn).ReleaseEvents(ctx, metapb.FromEventRelease(r))
		return err
	})
}

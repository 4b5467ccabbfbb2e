package metafake

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
)

// The fake keeps no CloudEvents dedup ledger (the sequencer does: test ingest against
// sequencer-svc/server); every ledger call is refused.

func (f *Meta) ClaimEvents(ctx context.Context, c meta.EventClaim) ([]meta.EventClaimAnswer, error) {
	return nil, fmt.Errorf("%w: claim events: metafake keeps no CloudEvents dedup ledger", meta.ErrInvalidArgument)
}

func (f *Meta) CompleteEvents(ctx context.Context, c meta.EventComplete) error {
	return fmt.Errorf("%w: complete events: metafake keeps no CloudEvents dedup ledger", meta.ErrInvalidArgument)
}

func (f *Meta) ReleaseEvents(ctx context.Context, r meta.EventRelease) error {
	return fmt.Errorf("%w: release events: metafake keeps no CloudEvents dedup ledger", meta.ErrInvalidArgument)
}

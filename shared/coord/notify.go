package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// DefaultKeep is how long Notifications remembers a handled notification by default.
const DefaultKeep = 7 * 24 * time.Hour

// Notifications records which object-store notifications were handled. Notifications
// arrive at least once and out of order, so a handler first claims its notification's key:
// only the first claim proceeds, the others drop the duplicate. A claim lapses after its
// TTL, so a notification whose handler died (Lambda timeout, crash) is handled by the next
// delivery. Done marks the work finished for Keep; Release gives a claim back after a
// failure so a retry need not wait for the TTL.
//
// Handlers must still be idempotent: a claim that lapsed while its handler was only slow
// lets a second handler run, and a redelivery after Keep is handled again.
//
// Layout: pk "ntf/" + key, sk "n"; attributes state ("claimed" or "done"), at (Unix
// milliseconds of the claim or Done) and, on a claim, by (a random token naming the
// Claim call); ExpiresAt = claim time + TTL, or Done time + Keep.
// One partition key per notification spreads the writes over DynamoDB partitions.
type Notifications struct {
	Store Store
	Keep  time.Duration // how long a handled notification is remembered; 0: DefaultKeep
}

const (
	notifyPrefix  = "ntf/"
	notifySK      = "n"
	stateClaimed  = "claimed"
	stateDone     = "done"
	notifyStateAt = "at"
	notifyBy      = "by"
)

// Claim claims the notification key (an object key with its version or sequencer, say)
// for ttl from the store's clock. first reports whether this call took the claim: false
// means another live claim holds it or it is done.
func (n Notifications) Claim(ctx context.Context, key string, ttl time.Duration) (first bool, err error) {
	if ttl <= 0 {
		return false, fmt.Errorf("coord: claim %s: ttl %v: %w", clip(key), ttl, ErrInvalid)
	}
	now := n.Store.Now()
	it := n.item(key, stateClaimed, now, now.Add(ttl))
	token := strconv.FormatInt(newVersion(), 36)
	it.Attrs[notifyBy] = token
	_, err = n.Store.Put(ctx, it, IfAbsent)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, ErrConditionFailed):
		return false, fmt.Errorf("coord: claim: %w", err)
	}
	// The condition failed. If the item holds our token, an earlier attempt of this very
	// Put succeeded and its answer was lost (the SDK retried it): the claim is ours.
	cur, err := n.Store.Get(ctx, it.PK, it.SK)
	switch {
	case err == nil:
		return cur.Attrs[notifyBy] == token && cur.Attrs["state"] == stateClaimed, nil
	case errors.Is(err, ErrNotFound):
		return false, nil // released or lapsed since; the next delivery claims it
	}
	return false, fmt.Errorf("coord: claim: %w", err)
}

// Done marks the notification key handled: claims fail for Keep from now, whoever holds
// the claim.
func (n Notifications) Done(ctx context.Context, key string) error {
	now := n.Store.Now()
	keep := n.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	if _, err := n.Store.Put(ctx, n.item(key, stateDone, now, now.Add(keep)), Condition{}); err != nil {
		return fmt.Errorf("coord: notification done: %w", err)
	}
	return nil
}

// Release gives back a claim on key that is not done, so the next delivery handles it at
// once. Releasing a key that is done or unclaimed does nothing.
func (n Notifications) Release(ctx context.Context, key string) error {
	it, err := n.Store.Get(ctx, notifyPrefix+key, notifySK)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("coord: release claim: %w", err)
	}
	if it.Attrs["state"] != stateClaimed {
		return nil
	}
	err = n.Store.Delete(ctx, it.PK, it.SK, IfVersion(it.Version))
	if err != nil && !errors.Is(err, ErrConditionFailed) { // changed since: not ours to release
		return fmt.Errorf("coord: release claim: %w", err)
	}
	return nil
}

// Handled reports whether key is marked done.
func (n Notifications) Handled(ctx context.Context, key string) (bool, error) {
	it, err := n.Store.Get(ctx, notifyPrefix+key, notifySK)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("coord: notification handled: %w", err)
	}
	return it.Attrs["state"] == stateDone, nil
}

func (n Notifications) item(key, state string, now, expires time.Time) Item {
	return Item{
		PK: notifyPrefix + key, SK: notifySK,
		ExpiresAt: expires,
		Attrs:     map[string]string{"state": state, notifyStateAt: strconv.FormatInt(now.UnixMilli(), 10)},
	}
}

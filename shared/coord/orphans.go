package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Orphans is GC's orphan clock: bucket objects found unreferenced and not retired, each
// with the time it was first found so, and the time of the last orphan sweep. Keeping them
// here rather than in a function's memory means a cold start neither restarts every
// orphan's clock nor sweeps the bucket again before the sweep interval has passed.
//
// GC records an orphan the first time it finds it (Record), deletes it once it has stayed
// an orphan for the grace period (then Forget), and forgets it when it is found referenced
// or retired. Records expire: an object that is gone or never found again stops costing
// storage, and one found again after its record expired starts a new clock (it waits
// longer, never less).
//
// Layout: pk "orphans", sk the object key, attribute first (Unix ms), expiry set by Record;
// pk "orphans/sweep", sk "last", attribute at (Unix ms) for ClaimSweep.
type Orphans struct {
	Store Store
}

// Orphan is one recorded orphan.
type Orphan struct {
	Key       string
	FirstSeen time.Time // millisecond precision
	ExpiresAt time.Time
}

const (
	orphansPK     = "orphans"
	orphanSweepPK = "orphans/sweep"
	orphanSweepSK = "last"
)

func parseMs(it Item, attr string) (time.Time, error) {
	ms, err := strconv.ParseInt(it.Attr(attr), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("coord: %s/%s: attribute %s %q: %w", clip(it.PK), clip(it.SK), attr, clip(it.Attr(attr)), ErrCorrupt)
	}
	return time.UnixMilli(ms), nil
}

func orphanOf(it Item) (Orphan, error) {
	first, err := parseMs(it, "first")
	if err != nil {
		return Orphan{}, err
	}
	return Orphan{Key: it.SK, FirstSeen: first, ExpiresAt: it.ExpiresAt}, nil
}

// Record records key as an orphan first seen at first, kept for ttl from now, unless a
// live record exists: then it returns that one, unchanged.
func (o Orphans) Record(ctx context.Context, key string, first time.Time, ttl time.Duration) (Orphan, error) {
	if ttl <= 0 {
		return Orphan{}, fmt.Errorf("coord: orphan %q: ttl %v: %w", clip(key), ttl, ErrInvalid)
	}
	it := Item{PK: orphansPK, SK: key, ExpiresAt: o.Store.Now().Add(ttl),
		Attrs: map[string]string{"first": strconv.FormatInt(first.UnixMilli(), 10)}}
	for range 4 { // a record expiring or forgotten between the Put and the Get: try again
		put, err := o.Store.Put(ctx, it, IfAbsent)
		if err == nil {
			return orphanOf(put)
		}
		if !errors.Is(err, ErrConditionFailed) {
			return Orphan{}, fmt.Errorf("coord: orphan record: %w", err)
		}
		cur, err := o.Store.Get(ctx, orphansPK, key)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Orphan{}, fmt.Errorf("coord: orphan record: %w", err)
		}
		return orphanOf(cur)
	}
	return Orphan{}, fmt.Errorf("coord: orphan record %q: kept changing: %w", clip(key), ErrConditionFailed)
}

// List calls fn with every live record in key order.
func (o Orphans) List(ctx context.Context, fn func(Orphan) error) error {
	var fnErr error
	err := o.Store.Query(ctx, orphansPK, "", func(it Item) error {
		or, err := orphanOf(it)
		if err != nil {
			return err
		}
		if fnErr = fn(or); fnErr != nil {
			return errStop
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return fmt.Errorf("coord: orphans list: %w", err)
	}
	return nil
}

// Forget removes key's record; a missing record is fine.
func (o Orphans) Forget(ctx context.Context, key string) error {
	if err := o.Store.Delete(ctx, orphansPK, key, Condition{}); err != nil {
		return fmt.Errorf("coord: orphan forget: %w", err)
	}
	return nil
}

// ClaimSweep reports whether an orphan sweep may start at now: when none started within
// interval before now. A true answer records now as the last sweep's start, so of
// concurrent callers at most one is told true.
func (o Orphans) ClaimSweep(ctx context.Context, now time.Time, interval time.Duration) (bool, error) {
	cond := IfAbsent
	cur, err := o.Store.Get(ctx, orphanSweepPK, orphanSweepSK)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return false, fmt.Errorf("coord: orphan sweep claim: %w", err)
	default:
		last, err := parseMs(cur, "at")
		if err != nil {
			return false, err
		}
		if now.Sub(last) < interval {
			return false, nil
		}
		cond = IfVersion(cur.Version)
	}
	_, err = o.Store.Put(ctx, Item{PK: orphanSweepPK, SK: orphanSweepSK,
		Attrs: map[string]string{"at": strconv.FormatInt(now.UnixMilli(), 10)}}, cond)
	if errors.Is(err, ErrConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("coord: orphan sweep claim: %w", err)
	}
	return true, nil
}

// LastSweep returns when the last claimed orphan sweep started (zero: never).
func (o Orphans) LastSweep(ctx context.Context) (time.Time, error) {
	cur, err := o.Store.Get(ctx, orphanSweepPK, orphanSweepSK)
	if errors.Is(err, ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("coord: orphan last sweep: %w", err)
	}
	return parseMs(cur, "at")
}

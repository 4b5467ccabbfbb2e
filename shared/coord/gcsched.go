package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// GCSchedule is the GC schedule: bucket objects the sequencer retired (no index entry
// references them) and the time after which they may be deleted (retirement plus the grace
// period readers get to finish range GETs). The GC function lists due entries in time
// order, deletes each object, then removes its entry; a crash in between lists the entry
// again, and deleting an object twice is harmless.
//
// Scheduling a key twice makes two entries; both come due and both deletes succeed.
//
// Layout: pk "gc", sk the due time as 20 zero-padded decimal Unix milliseconds, "/", and
// the object key (so sort-key order is time order, then key order); attribute key. An
// object key may therefore be at most MaxSKLen-21 = 1003 bytes. All entries share one
// partition key: DynamoDB serves about 1000 writes a second to it, far above the rate at
// which objects are retired.
type GCSchedule struct {
	Store Store
}

// GCEntry is one scheduled deletion.
type GCEntry struct {
	Key   string    // object key
	After time.Time // delete after this time (millisecond precision)
}

const (
	gcPK      = "gc"
	gcTimeLen = 20
)

var errStop = errors.New("coord: stop")

func gcSK(e GCEntry) string {
	ms := max(e.After.UnixMilli(), 0)
	return fmt.Sprintf("%020d/%s", ms, e.Key)
}

// Schedule records that object key may be deleted after after, and returns the entry.
func (g GCSchedule) Schedule(ctx context.Context, key string, after time.Time) (GCEntry, error) {
	if key == "" {
		return GCEntry{}, fmt.Errorf("coord: gc schedule: empty key: %w", ErrInvalid)
	}
	e := GCEntry{Key: key, After: time.UnixMilli(max(after.UnixMilli(), 0))}
	_, err := g.Store.Put(ctx, Item{PK: gcPK, SK: gcSK(e), Attrs: map[string]string{"key": key}}, Condition{})
	if err != nil {
		return GCEntry{}, fmt.Errorf("coord: gc schedule: %w", err)
	}
	return e, nil
}

// Due calls fn with each entry due at now (After not after now) in time order, then key
// order. An error from fn stops the listing and is returned.
func (g GCSchedule) Due(ctx context.Context, now time.Time, fn func(GCEntry) error) error {
	limit := now.UnixMilli()
	var fnErr error
	err := g.Store.Query(ctx, gcPK, "", func(it Item) error {
		if len(it.SK) <= gcTimeLen || it.SK[gcTimeLen] != '/' {
			return fmt.Errorf("coord: gc entry %q: bad sort key: %w", clip(it.SK), ErrCorrupt)
		}
		ms, err := strconv.ParseInt(it.SK[:gcTimeLen], 10, 64)
		if err != nil {
			return fmt.Errorf("coord: gc entry %q: bad time: %w", clip(it.SK), ErrCorrupt)
		}
		if ms > limit {
			return errStop
		}
		if fnErr = fn(GCEntry{Key: it.SK[gcTimeLen+1:], After: time.UnixMilli(ms)}); fnErr != nil {
			return errStop
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return fnErr
	case errors.Is(err, errStop):
		return nil
	case err != nil:
		return fmt.Errorf("coord: gc due: %w", err)
	}
	return nil
}

// Remove removes entry e (its object was deleted). Removing a missing entry succeeds.
func (g GCSchedule) Remove(ctx context.Context, e GCEntry) error {
	if e.Key == "" {
		return fmt.Errorf("coord: gc remove: empty key: %w", ErrInvalid)
	}
	if err := g.Store.Delete(ctx, gcPK, gcSK(e), Condition{}); err != nil {
		return fmt.Errorf("coord: gc remove: %w", err)
	}
	return nil
}

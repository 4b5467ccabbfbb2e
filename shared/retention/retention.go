// Package retention is the retention function's handler: time and size retention
// per stream, metadata first.
//
// # Basics
//
// Sweep walks every stream whose cleanup policy is delete and that sets retention_ms or
// retention_bytes (>= 0), and for each partition computes a new log start with Plan from
// its index entries, then calls TrimPartition: the sequencer moves the log start, drops the
// entries wholly below it and retires objects no entry references any more; gc deletes them
// after its grace period. A fetch below the new log start fails with offset out of range
// naming the log start.
//
// Plan's rules, over the partition's entries from the log start in offset order:
//
//   - time (retention_ms >= 0): the log start moves to the end of the last entry of the
//     leading run of entries whose MaxTimestamp is older than now - retention_ms (Kafka's
//     rule for segments: the largest timestamp decides). It may empty the partition.
//   - size (retention_bytes >= 0): the oldest entries are dropped while the bytes left
//     after dropping one stay >= retention_bytes (Kafka's rule: a partition keeps at least
//     retention_bytes and exceeds it by less than one entry), and never the newest entry
//     (Kafka never deletes the active segment).
//   - both: the larger of the two log starts.
//
// The log start only moves forward and lands on entry boundaries: records are retained or
// dropped a whole index entry (a WAL chunk, or a segment) at a time.
//
// # Caveats
//
//   - Timestamps are the producers' (CreateTime); a producer with a skewed clock shifts its
//     records' retention, as in Kafka.
//   - Compacted streams are left to compaction (Kafka's compact policy ignores time and
//     size retention).
//   - Sizes are index entry lengths: a WAL entry counts its chunk header, a segment entry its
//     data region (not its footer).
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/notify"
)

// ErrConfig: the configuration cannot work.
var ErrConfig = errors.New("retention: invalid config")

// Meta is what retention needs from the sequencer (a subset of meta.Client).
type Meta interface {
	ListNamespaces(ctx context.Context) ([]string, error)
	ListStreams(ctx context.Context, ns string) ([]meta.Stream, error)
	Lookup(ctx context.Context, streamID uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error)
	TrimPartition(ctx context.Context, streamID uint64, partition int32, logStart int64) (meta.PartitionState, error)
}

// Config configures a Retention.
type Config struct {
	Meta   Meta // required
	Now    func() time.Time
	Logger *slog.Logger
}

// Retention applies retention policies.
type Retention struct{ cfg Config }

// New returns a Retention.
func New(cfg Config) (*Retention, error) {
	if cfg.Meta == nil {
		return nil, fmt.Errorf("%w: Meta is required", ErrConfig)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Retention{cfg: cfg}, nil
}

// Handler returns the function's invocation router (scheduled events run Sweep).
func (r *Retention) Handler() notify.Handler {
	return notify.Handler{Sweep: func(ctx context.Context) error { _, err := r.Sweep(ctx); return err }}
}

// Trim is one log start move.
type Trim struct {
	StreamID          uint64
	Partition         int32
	From, To          int64 // old and new log start
	Entries           int   // entries wholly below the new log start
	Bytes             int64 // their bytes
	ByTime, BySize    bool
	HighWatermark     int64
	LogStartConfirmed int64 // the log start the sequencer answered
}

// Sweep applies retention to every stream; it returns the trims it made.
func (r *Retention) Sweep(ctx context.Context) ([]Trim, error) {
	nss, err := r.cfg.Meta.ListNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("retention: sweep: %w", err)
	}
	var trims []Trim
	var errs []error
	for _, ns := range nss {
		sts, err := r.cfg.Meta.ListStreams(ctx, ns)
		if err != nil {
			errs = append(errs, fmt.Errorf("retention: sweep %s: %w", ns, err))
			continue
		}
		for _, st := range sts {
			t, err := r.Stream(ctx, st)
			trims = append(trims, t...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return trims, errors.Join(errs...)
}

// Stream applies st's retention to each of its partitions.
func (r *Retention) Stream(ctx context.Context, st meta.Stream) ([]Trim, error) {
	if st.CleanupPolicy == meta.CleanupCompact || (st.RetentionMs < 0 && st.RetentionBytes < 0) {
		return nil, nil
	}
	var trims []Trim
	var errs []error
	for p := range st.Partitions {
		t, ok, err := r.Partition(ctx, st, p)
		if errors.Is(err, meta.ErrStreamNotFound) || errors.Is(err, meta.ErrPartitionNotFound) {
			return trims, nil // deleted meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			trims = append(trims, t)
		}
	}
	return trims, errors.Join(errs...)
}

// Partition applies st's retention to one partition. ok reports whether it moved the log
// start.
func (r *Retention) Partition(ctx context.Context, st meta.Stream, partition int32) (Trim, bool, error) {
	_, ps, err := r.cfg.Meta.Lookup(ctx, st.ID, partition, 0, 0)
	if err != nil {
		return Trim{}, false, fmt.Errorf("retention: lookup %d/%d: %w", st.ID, partition, err)
	}
	var entries []meta.IndexEntry
	for from := ps.LogStart; from < ps.HighWatermark; {
		es, _, err := r.cfg.Meta.Lookup(ctx, st.ID, partition, from, 1000)
		if errors.Is(err, meta.ErrOffsetOutOfRange) {
			return Trim{}, false, nil // trimmed meanwhile
		}
		if err != nil {
			return Trim{}, false, fmt.Errorf("retention: lookup %d/%d from %d: %w", st.ID, partition, from, err)
		}
		if len(es) == 0 {
			break
		}
		entries = append(entries, es...)
		from = es[len(es)-1].End()
	}
	p := Plan(entries, ps.LogStart, st.RetentionMs, st.RetentionBytes, r.cfg.Now())
	if p.LogStart <= ps.LogStart {
		return Trim{}, false, nil
	}
	got, err := r.cfg.Meta.TrimPartition(ctx, st.ID, partition, p.LogStart)
	if err != nil {
		return Trim{}, false, fmt.Errorf("retention: trim %d/%d to %d: %w", st.ID, partition, p.LogStart, err)
	}
	t := Trim{StreamID: st.ID, Partition: partition, From: ps.LogStart, To: p.LogStart, Entries: p.Entries, Bytes: p.Bytes,
		ByTime: p.ByTime, BySize: p.BySize, HighWatermark: got.HighWatermark, LogStartConfirmed: got.LogStart}
	r.cfg.Logger.Info("retention trimmed a partition", "stream", st.Namespace+"/"+st.Name, "partition", partition,
		"from", t.From, "to", t.To, "entries", t.Entries, "bytes", t.Bytes, "by_time", t.ByTime, "by_size", t.BySize)
	return t, true, nil
}

// Planned is Plan's answer.
type Planned struct {
	LogStart       int64 // the new log start (logStart when nothing is dropped)
	Entries        int   // entries dropped
	Bytes          int64 // their bytes
	ByTime, BySize bool  // which rule dropped something
}

// Plan computes a partition's new log start from its entries (in offset order, from the
// log start) by the rules in the package comment. retentionMs or retentionBytes < 0
// disables that rule.
func Plan(entries []meta.IndexEntry, logStart, retentionMs, retentionBytes int64, now time.Time) Planned {
	out := Planned{LogStart: logStart}
	byTime, bySize := 0, 0 // entries each rule drops
	if retentionMs >= 0 {
		cutoff := now.UnixMilli() - retentionMs
		for byTime < len(entries) && entries[byTime].MaxTimestamp < cutoff {
			byTime++
		}
	}
	if retentionBytes >= 0 {
		var total int64
		for _, e := range entries {
			total += e.Length
		}
		for bySize < len(entries)-1 && total-entries[bySize].Length >= retentionBytes {
			total -= entries[bySize].Length
			bySize++
		}
	}
	n := max(byTime, bySize)
	if n == 0 {
		return out
	}
	out.ByTime, out.BySize = byTime > 0, bySize > 0
	out.Entries = n
	for _, e := range entries[:n] {
		out.Bytes += e.Length
	}
	out.LogStart = max(logStart, entries[n-1].End())
	return out
}

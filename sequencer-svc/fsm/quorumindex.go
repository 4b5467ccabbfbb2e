package fsm

import (
	"fmt"
	"math"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// The offset index of quorum streams (meta.QuorumIndexClient). A quorum partition's
// offsets are assigned by its journal, not here: CommitWal never writes its index. What
// the journal offloads to segments is appended with AppendSegments, under the partition's
// offload lease, and the partition's high watermark here becomes the end of the last
// segment. Retention (TrimPartition) and the readers then treat the partition's index as
// any other.
//
// AppendSegments checks, in order: the shape (CheckSegmentAppend); the partition exists
// and its stream is of class quorum (else meta.ErrInvalidArgument); if the index already
// holds the entries exactly it answers nil and changes nothing (a retry of an applied
// append, checked before the lease so a retry whose lease ran out is not told to discard
// a referenced segment); the lease is the current, unexpired grant (meta.ErrLeaseLost);
// the entries start at the high watermark (meta.ErrIndexChanged). It then writes the
// entries as index blocks, moves the high watermark to their end, adds one reference per
// entry and publishes a PartitionUpdate with the entries Added.

// AppendSegments is the command that appends a.Entries to a quorum partition's index.
// a.StampMs is not carried: the leader's stamp is.
func AppendSegments(a meta.SegmentAppend) *metapb.Command {
	c := &metapb.AppendSegmentsCmd{StreamId: a.Lease.StreamID, Partition: a.Lease.Partition, LeaseHolder: a.Lease.Holder,
		LeaseEpoch: a.Lease.Epoch, Entries: make([]*metapb.SegmentEntry, len(a.Entries))}
	for i, e := range a.Entries {
		c.Entries[i] = &metapb.SegmentEntry{BaseOffset: e.BaseOffset, Count: e.Count, Object: e.Object, Offset: e.Offset,
			Length: e.Length, MaxTimestamp: e.MaxTimestamp, Kind: uint32(e.Kind)}
	}
	return &metapb.Command{Op: &metapb.Command_AppendSegments{AppendSegments: c}}
}

// SegmentAppendOf is the meta.SegmentAppend of an AppendSegmentsCmd (its lease's kind is
// meta.LeaseOffload; ExpiresMs and StampMs are not carried).
func SegmentAppendOf(c *metapb.AppendSegmentsCmd) meta.SegmentAppend {
	a := meta.SegmentAppend{Lease: meta.Lease{StreamID: c.GetStreamId(), Partition: c.GetPartition(), Kind: meta.LeaseOffload,
		Holder: c.GetLeaseHolder(), Epoch: c.GetLeaseEpoch()}, Entries: make([]meta.IndexEntry, len(c.GetEntries()))}
	for i, e := range c.GetEntries() {
		a.Entries[i] = meta.IndexEntry{BaseOffset: e.GetBaseOffset(), Count: e.GetCount(), Kind: meta.EntryKind(e.GetKind()), Object: e.GetObject(),
			Offset: e.GetOffset(), Length: e.GetLength(), MaxTimestamp: e.GetMaxTimestamp()}
	}
	return a
}

// CheckSegmentAppend validates a SegmentAppend's shape without the state: a lease of kind
// meta.LeaseOffload with a holder and an epoch; 1..meta.MaxSwapEntries entries of kind
// segment, contiguous, counts > 0, objects named, offsets >= 0 and lengths > 0.
func CheckSegmentAppend(a meta.SegmentAppend) error {
	l := a.Lease
	where := fmt.Sprintf("append segments %d/%d", l.StreamID, l.Partition)
	if l.Kind != meta.LeaseOffload || l.Holder == "" || l.Epoch == 0 {
		return fmt.Errorf("%w: %s: lease of kind %q, holder %q, epoch %d: want kind %q, a holder and an epoch",
			meta.ErrInvalidArgument, where, l.Kind, l.Holder, l.Epoch, meta.LeaseOffload)
	}
	if len(a.Entries) == 0 || len(a.Entries) > meta.MaxSwapEntries {
		return fmt.Errorf("%w: %s: %d entries: want 1..%d", meta.ErrInvalidArgument, where, len(a.Entries), meta.MaxSwapEntries)
	}
	for i, e := range a.Entries {
		if e.Count <= 0 || e.BaseOffset < 0 || e.Object == "" || e.Offset < 0 || e.Length <= 0 {
			return fmt.Errorf("%w: %s: entry %d %+v: want base >= 0, count > 0, an object, offset >= 0, length > 0",
				meta.ErrInvalidArgument, where, i, e)
		}
		if e.Kind != meta.KindSegment {
			return fmt.Errorf("%w: %s: entry %d of kind %d: want segment (%d)", meta.ErrInvalidArgument, where, i, e.Kind, meta.KindSegment)
		}
		if e.BaseOffset > math.MaxInt64-e.Count {
			return fmt.Errorf("%w: %s: entry %d: offsets overflow", meta.ErrInvalidArgument, where, i)
		}
		if i > 0 && e.BaseOffset != a.Entries[i-1].End() {
			return fmt.Errorf("%w: %s: entries not contiguous at %d (previous ends at %d)",
				meta.ErrInvalidArgument, where, e.BaseOffset, a.Entries[i-1].End())
		}
	}
	return nil
}

// appendSegments applies an AppendSegmentsCmd. changed is false when the index already
// held the entries (a retried append): nothing was written and no event is due.
func (a *applier) appendSegments(c *metapb.AppendSegmentsCmd) (u meta.PartitionUpdate, changed bool, err error) {
	s := SegmentAppendOf(c)
	if err := CheckSegmentAppend(s); err != nil {
		return u, false, err
	}
	id, p := s.Lease.StreamID, s.Lease.Partition
	from, to := s.Entries[0].BaseOffset, s.Entries[len(s.Entries)-1].End()
	where := fmt.Sprintf("append segments %d/%d [%d,%d)", id, p, from, to)
	rec, err := a.partition(id, p)
	if err != nil {
		return u, false, fmt.Errorf("%s: %w", where, err)
	}
	if v := a.tx.Bucket(bStreams).Get(a.tx.Bucket(bStreamIDs).Get(u64(id))); v != nil {
		st, err := decodeStream(v)
		if err != nil {
			a.check(err)
			return u, false, err
		}
		if st.Class != meta.ClassQuorum {
			return u, false, fmt.Errorf("%w: %s: stream %s/%s is of class %s, segments are appended to quorum streams only",
				meta.ErrInvalidArgument, where, st.Namespace, st.Name, st.Class)
		}
	}
	// A retry of an applied append: the index holds the entries exactly (those still
	// above the log start: retention may have trimmed some since).
	if to <= rec.GetHighWatermark() {
		cur, err := readEntries(a.tx, id, p, rec.GetSettled(), a.tailOf(pkey{id, p}).es, max(from, rec.GetLogStart()), to, math.MaxInt)
		if err != nil {
			a.check(err)
			return u, false, err
		}
		keep := s.Entries
		for len(keep) > 0 && keep[0].End() <= rec.GetLogStart() {
			keep = keep[1:]
		}
		if sameEntries(cur, keep) {
			return u, false, nil
		}
	}
	lr, _ := a.lease(leaseKey(id, p, meta.LeaseOffload))
	if lr.GetHolder() != s.Lease.Holder || lr.GetEpoch() != s.Lease.Epoch || lr.GetExpiresMs() <= a.clock {
		return u, false, fmt.Errorf("%s: lease %s epoch %d of %s; current: epoch %d of %s, expires %s, clock %s: %w",
			where, meta.LeaseOffload, s.Lease.Epoch, s.Lease.Holder, lr.GetEpoch(), lr.GetHolder(), fmtMs(lr.GetExpiresMs()), fmtMs(a.clock), meta.ErrLeaseLost)
	}
	if from != rec.GetHighWatermark() {
		return u, false, fmt.Errorf("%s: the index ends at %d: %w", where, rec.GetHighWatermark(), meta.ErrIndexChanged)
	}
	if rec.GetSettled() < rec.GetHighWatermark() {
		a.settlePartition(id, p, rec) // never the case for a quorum partition; kept as a guard
	}
	a.appendBlocks(id, p, s.Entries)
	refs := refDelta{}
	for _, e := range s.Entries {
		refs.add(e.Object, 1)
		rec.Bytes += e.Length
	}
	rec.HighWatermark, rec.Settled = to, to
	a.putPartition(id, p, rec)
	a.applyRefs(refs)
	return meta.PartitionUpdate{StreamID: id, Partition: p, LogStart: rec.GetLogStart(), HighWatermark: to,
		Added: append([]meta.IndexEntry(nil), s.Entries...)}, true, nil
}

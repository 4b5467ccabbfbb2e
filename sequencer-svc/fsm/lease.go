package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// Leases, index swaps, trims, object reference counts and the retired set.

// AcquireLease is the command that grants or renews a lease for ttlMs on the FSM clock.
func AcquireLease(streamID uint64, partition int32, kind, holder string, ttlMs int64) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_AcquireLease{AcquireLease: &metapb.AcquireLeaseCmd{
		StreamId: streamID, Partition: partition, Kind: kind, Holder: holder, TtlMs: ttlMs}}}
}

// ReleaseLease is the command that ends lease l if it is still the current grant.
func ReleaseLease(l meta.Lease) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_ReleaseLease{ReleaseLease: metapb.FromLease(l)}}
}

// SwapIndex is the command that replaces s.Old by s.New under s.Lease. s.StampMs is not
// carried: the leader's stamp is.
func SwapIndex(s meta.IndexSwap) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_SwapIndex{SwapIndex: &metapb.SwapIndexCmd{
		Lease: metapb.FromLease(s.Lease), Old: metapb.FromIndexEntries(s.Old), New: metapb.FromIndexEntries(s.New)}}}
}

// TrimPartition is the command that moves a partition's log start forward.
func TrimPartition(streamID uint64, partition int32, logStart int64) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_TrimPartition{TrimPartition: &metapb.TrimPartitionCmd{
		StreamId: streamID, Partition: partition, LogStart: logStart}}}
}

// ForgetRetired is the command that removes keys from the retired set.
func ForgetRetired(keys []string) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_ForgetRetired{ForgetRetired: &metapb.ForgetRetiredCmd{Keys: keys}}}
}

// CheckLeaseRequest validates an AcquireLease's arguments: kind and holder valid names
// (holder may also hold ':' and '/'), 0 < ttl <= meta.MaxLeaseTTL.
func CheckLeaseRequest(kind, holder string, ttlMs int64) error {
	if err := checkName("lease kind", kind); err != nil {
		return fmt.Errorf("acquire lease: %w", err)
	}
	if !validHolder(holder) {
		return fmt.Errorf("%w: acquire lease: holder %q: want 1..%d printable ASCII characters",
			meta.ErrInvalidArgument, holder, meta.MaxNameLength)
	}
	if ttlMs <= 0 || ttlMs > meta.MaxLeaseTTL.Milliseconds() {
		return fmt.Errorf("%w: acquire lease: ttl %d ms: want 1..%d", meta.ErrInvalidArgument, ttlMs, meta.MaxLeaseTTL.Milliseconds())
	}
	return nil
}

func validHolder(s string) bool {
	if len(s) == 0 || len(s) > meta.MaxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// CheckSwap validates an IndexSwap's shape without the state: a lease with a kind, holder
// and epoch; Old and New non-empty (at most meta.MaxSwapEntries each), each contiguous with
// counts > 0, objects named, offsets >= 0 and lengths > 0; New all of kind segment and
// covering exactly Old's offsets.
func CheckSwap(s meta.IndexSwap) error {
	l := s.Lease
	where := fmt.Sprintf("swap index %d/%d", l.StreamID, l.Partition)
	if l.Kind == "" || l.Holder == "" || l.Epoch == 0 {
		return fmt.Errorf("%w: %s: lease without kind, holder or epoch", meta.ErrInvalidArgument, where)
	}
	for _, run := range []struct {
		name string
		es   []meta.IndexEntry
	}{{"old", s.Old}, {"new", s.New}} {
		if len(run.es) == 0 || len(run.es) > meta.MaxSwapEntries {
			return fmt.Errorf("%w: %s: %d %s entries: want 1..%d", meta.ErrInvalidArgument, where, len(run.es), run.name, meta.MaxSwapEntries)
		}
		for i, e := range run.es {
			if e.Count <= 0 || e.BaseOffset < 0 || e.Object == "" || e.Offset < 0 || e.Length <= 0 {
				return fmt.Errorf("%w: %s: %s entry %d %+v: want base >= 0, count > 0, an object, offset >= 0, length > 0",
					meta.ErrInvalidArgument, where, run.name, i, e)
			}
			if i > 0 && e.BaseOffset != run.es[i-1].End() {
				return fmt.Errorf("%w: %s: %s entries not contiguous at %d (previous ends at %d)",
					meta.ErrInvalidArgument, where, run.name, e.BaseOffset, run.es[i-1].End())
			}
			if run.name == "new" && e.Kind != meta.KindSegment {
				return fmt.Errorf("%w: %s: new entry %d of kind %d: want segment (%d)", meta.ErrInvalidArgument, where, i, e.Kind, meta.KindSegment)
			}
		}
	}
	oldFrom, oldTo := s.Old[0].BaseOffset, s.Old[len(s.Old)-1].End()
	newFrom, newTo := s.New[0].BaseOffset, s.New[len(s.New)-1].End()
	if oldFrom != newFrom || oldTo != newTo {
		return fmt.Errorf("%w: %s: new entries cover [%d,%d), old [%d,%d)", meta.ErrInvalidArgument, where, newFrom, newTo, oldFrom, oldTo)
	}
	return nil
}

func leaseKey(id uint64, p int32, kind string) []byte {
	return append(partKey(id, p), kind...)
}

func (a *applier) lease(key []byte) (*metapb.LeaseRecord, bool) {
	v := a.tx.Bucket(bLeases).Get(key)
	if v == nil {
		return &metapb.LeaseRecord{}, false
	}
	rec := &metapb.LeaseRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		a.check(fmt.Errorf("%w: lease %x: %v", ErrCorrupt, key, err))
	}
	return rec, true
}

func (a *applier) putLease(key []byte, rec *metapb.LeaseRecord) {
	v, err := proto.Marshal(rec)
	a.check(err)
	a.check(a.tx.Bucket(bLeases).Put(key, v))
}

// acquireLease grants the lease when none is live (ExpiresMs <= clock) or renews it for
// its holder. A grant to a holder that did not hold a live lease takes the next epoch.
func (a *applier) acquireLease(c *metapb.AcquireLeaseCmd) (meta.Lease, error) {
	id, p, kind, holder := c.GetStreamId(), c.GetPartition(), c.GetKind(), c.GetHolder()
	where := fmt.Sprintf("acquire lease %d/%d %s for %s", id, p, kind, holder)
	if err := CheckLeaseRequest(kind, holder, c.GetTtlMs()); err != nil {
		return meta.Lease{}, err
	}
	if _, err := a.partition(id, p); err != nil {
		return meta.Lease{}, fmt.Errorf("%s: %w", where, err)
	}
	key := leaseKey(id, p, kind)
	rec, _ := a.lease(key)
	live := rec.GetExpiresMs() > a.clock
	if live && rec.GetHolder() != holder {
		return meta.Lease{}, fmt.Errorf("%s: held by %s (epoch %d) until %s: %w",
			where, rec.GetHolder(), rec.GetEpoch(), fmtMs(rec.GetExpiresMs()), meta.ErrLeaseHeld)
	}
	if !live {
		rec.Epoch++
		rec.Holder = holder
	}
	rec.ExpiresMs = a.clock + c.GetTtlMs()
	a.putLease(key, rec)
	return meta.Lease{StreamID: id, Partition: p, Kind: kind, Holder: holder, Epoch: rec.Epoch, ExpiresMs: rec.ExpiresMs}, nil
}

// releaseLease expires l's record if l is its current grant; anything else is a no-op.
func (a *applier) releaseLease(l meta.Lease) error {
	key := leaseKey(l.StreamID, l.Partition, l.Kind)
	rec, ok := a.lease(key)
	if ok && rec.GetHolder() == l.Holder && rec.GetEpoch() == l.Epoch && rec.GetExpiresMs() != 0 {
		rec.ExpiresMs = 0
		a.putLease(key, rec)
	}
	return nil
}

// sameEntries reports whether got is want exactly (BaseOffset, Count, Kind, Object, Offset
// and Length; MaxTimestamp is not compared).
func sameEntries(got, want []meta.IndexEntry) bool {
	if len(got) != len(want) {
		return false
	}
	for i, g := range got {
		e := want[i]
		if g.BaseOffset != e.BaseOffset || g.Count != e.Count || g.Kind != e.Kind || g.Object != e.Object || g.Offset != e.Offset || g.Length != e.Length {
			return false
		}
	}
	return true
}

// swapIndex applies a SwapIndexCmd. changed is false when the index already held New (a
// retried swap): nothing was written and no event is due.
func (a *applier) swapIndex(c *metapb.SwapIndexCmd) (u meta.PartitionUpdate, changed bool, err error) {
	s := meta.IndexSwap{Lease: metapb.ToLease(c.GetLease()), Old: metapb.ToIndexEntries(c.GetOld()), New: metapb.ToIndexEntries(c.GetNew())}
	if err := CheckSwap(s); err != nil {
		return u, false, err
	}
	l := s.Lease
	id, p := l.StreamID, l.Partition
	from, to := s.Old[0].BaseOffset, s.Old[len(s.Old)-1].End()
	where := fmt.Sprintf("swap index %d/%d [%d,%d)", id, p, from, to)
	rec, err := a.partition(id, p)
	if err != nil {
		return u, false, fmt.Errorf("%s: %w", where, err)
	}
	cur, err := readEntries(a.tx, id, p, rec.GetSettled(), a.tailOf(pkey{id, p}).es, from, to, math.MaxInt)
	if err != nil {
		a.check(err)
		return u, false, err
	}
	// New entries wholly below the log start (Old's first entry may straddle it) are not
	// kept: a trim would have dropped them.
	keep := s.New
	for len(keep) > 0 && keep[0].End() <= rec.GetLogStart() {
		keep = keep[1:]
	}
	// A retry of a swap that was applied: the index holds New exactly. Say so before the
	// lease check, so a retry whose lease ran out meanwhile is not told to discard
	// objects the index references.
	if len(keep) > 0 {
		i := 0
		for i < len(cur) && cur[i].End() <= keep[0].BaseOffset {
			i++
		}
		if sameEntries(cur[i:], keep) {
			return u, false, nil
		}
	}
	lr, _ := a.lease(leaseKey(id, p, l.Kind))
	if lr.GetHolder() != l.Holder || lr.GetEpoch() != l.Epoch || lr.GetExpiresMs() <= a.clock {
		return u, false, fmt.Errorf("%s: lease %s epoch %d of %s; current: epoch %d of %s, expires %s, clock %s: %w",
			where, l.Kind, l.Epoch, l.Holder, lr.GetEpoch(), lr.GetHolder(), fmtMs(lr.GetExpiresMs()), fmtMs(a.clock), meta.ErrLeaseLost)
	}
	if !sameEntries(cur, s.Old) {
		return u, false, fmt.Errorf("%s: the old entries are no longer in the index: %w", where, meta.ErrIndexChanged)
	}

	if to > rec.GetSettled() {
		a.settlePartition(id, p, rec)
	}
	a.replaceRange(id, p, from, to, keep)
	refs := refDelta{}
	for _, e := range s.Old {
		refs.add(e.Object, -1)
		rec.Bytes -= e.Length
	}
	for _, e := range keep {
		refs.add(e.Object, 1)
		rec.Bytes += e.Length
	}
	a.putPartition(id, p, rec)
	a.applyRefs(refs)
	// An object of a New entry dropped below the log start that nothing references is
	// retired at once, so GC deletes it like any other.
	rb, refb := a.tx.Bucket(bRetired), a.tx.Bucket(bRefs)
	for _, e := range s.New[:len(s.New)-len(keep)] {
		if k := []byte(e.Object); refb.Get(k) == nil && rb.Get(k) == nil {
			a.check(putU64(rb, k, uint64(a.clock)))
		}
	}
	return meta.PartitionUpdate{StreamID: id, Partition: p, LogStart: rec.GetLogStart(), HighWatermark: rec.GetHighWatermark(), Replaced: true}, true, nil
}

// trimPartition moves the log start forward and drops the entries wholly below it. u is
// nil when nothing changed.
func (a *applier) trimPartition(id uint64, p int32, logStart int64) (meta.PartitionState, *meta.PartitionUpdate, error) {
	where := fmt.Sprintf("trim partition %d/%d to %d", id, p, logStart)
	rec, err := a.partition(id, p)
	if err != nil {
		return meta.PartitionState{}, nil, fmt.Errorf("%s: %w", where, err)
	}
	st := meta.PartitionState{StreamID: id, Partition: p, LogStart: rec.GetLogStart(), HighWatermark: rec.GetHighWatermark(), Bytes: rec.GetBytes()}
	if logStart > rec.GetHighWatermark() {
		return st, nil, fmt.Errorf("%s: high watermark %d: %w", where, rec.GetHighWatermark(), meta.ErrOffsetOutOfRange)
	}
	if logStart <= rec.GetLogStart() {
		return st, nil, nil
	}
	dropped, err := readEntries(a.tx, id, p, rec.GetSettled(), a.tailOf(pkey{id, p}).es, 0, logStart, math.MaxInt)
	if err != nil {
		a.check(err)
		return st, nil, err
	}
	for len(dropped) > 0 && dropped[len(dropped)-1].End() > logStart {
		dropped = dropped[:len(dropped)-1]
	}
	refs := refDelta{}
	if n := len(dropped); n > 0 {
		if dropped[n-1].End() > rec.GetSettled() {
			a.settlePartition(id, p, rec)
		}
		a.replaceRange(id, p, dropped[0].BaseOffset, dropped[n-1].End(), nil)
		for _, e := range dropped {
			refs.add(e.Object, -1)
			rec.Bytes -= e.Length
		}
	}
	rec.LogStart = logStart
	a.putPartition(id, p, rec)
	a.applyRefs(refs)
	st.LogStart, st.Bytes = rec.LogStart, rec.Bytes
	return st, &meta.PartitionUpdate{StreamID: id, Partition: p, LogStart: rec.LogStart, HighWatermark: rec.GetHighWatermark(), Replaced: len(dropped) > 0}, nil
}

// forgetRetired removes keys from the retired set (unknown keys are ignored).
func (a *applier) forgetRetired(keys []string) {
	rb := a.tx.Bucket(bRetired)
	for _, k := range keys {
		if k != "" && rb.Get([]byte(k)) != nil {
			a.check(rb.Delete([]byte(k)))
		}
	}
}

// refDelta accumulates reference count changes per object within one command.
type refDelta map[string]int64

func (d refDelta) add(obj string, n int64) { d[obj] += n }

// applyRefs applies reference count changes in key order. An object whose count reaches
// zero leaves refs and enters the retired set at the FSM clock; one that gains a reference
// leaves the retired set. A count below zero is corruption.
func (a *applier) applyRefs(d refDelta) {
	keys := make([]string, 0, len(d))
	for k, n := range d {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	refs, retired := a.tx.Bucket(bRefs), a.tx.Bucket(bRetired)
	for _, k := range keys {
		kb := []byte(k)
		cur := int64(getU64(refs, kb))
		next := cur + d[k]
		switch {
		case next < 0:
			a.check(fmt.Errorf("%w: object %s: reference count %d%+d", ErrCorrupt, k, cur, d[k]))
			return
		case next == 0:
			a.check(refs.Delete(kb))
			a.check(putU64(retired, kb, uint64(a.clock)))
		default:
			if cur == 0 && retired.Get(kb) != nil {
				a.check(retired.Delete(kb))
			}
			a.check(putU64(refs, kb, uint64(next)))
		}
	}
}

// migrateV1 turns a v1 database into v2 inside tx: the new buckets, reference counts
// computed from the index (objects that lost their references under v1 are not in the
// retired set: GC's orphan sweep finds them), and the format.
func migrateV1(tx *bolt.Tx) error {
	for _, b := range [][]byte{bRefs, bRetired, bLeases} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	counts := map[string]uint64{}
	err := tx.Bucket(bIndex).ForEach(func(k, v []byte) error {
		e, err := decodeIndex(k, v)
		if err != nil {
			return err
		}
		counts[e.Object]++
		return nil
	})
	if err != nil {
		return err
	}
	objs := make([]string, 0, len(counts))
	for o := range counts {
		objs = append(objs, o)
	}
	slices.Sort(objs)
	refs := tx.Bucket(bRefs)
	for _, o := range objs {
		if err := putU64(refs, []byte(o), counts[o]); err != nil {
			return err
		}
	}
	return tx.Bucket(bMeta).Put(kFormat, []byte(formatV2))
}

// ---- reads ----

// ListRetired lists up to limit retired objects with keys after `after`, in key order
// (limit <= 0 or above meta.MaxRetiredList means meta.MaxRetiredList).
func (f *FSM) ListRetired(after string, limit int) ([]meta.RetiredObject, error) {
	if limit <= 0 || limit > meta.MaxRetiredList {
		limit = meta.MaxRetiredList
	}
	var out []meta.RetiredObject
	err := f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bRetired).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			if len(v) != 8 {
				return fmt.Errorf("%w: retired record %q of %d bytes", ErrCorrupt, k, len(v))
			}
			out = append(out, meta.RetiredObject{Key: string(k), RetiredMs: int64(binary.BigEndian.Uint64(v))})
		}
		return nil
	})
	return out, err
}

// Referenced reports for each key whether an index entry points at it.
func (f *FSM) Referenced(keys []string) ([]bool, error) {
	out := make([]bool, len(keys))
	err := f.view(func(tx *bolt.Tx) error {
		refs := tx.Bucket(bRefs)
		for i, k := range keys {
			out[i] = k != "" && refs.Get([]byte(k)) != nil
		}
		return nil
	})
	return out, err
}

// RefCount is the number of index entries pointing at key (tests and tools).
func (f *FSM) RefCount(key string) int64 {
	var n int64
	_ = f.view(func(tx *bolt.Tx) error {
		n = int64(getU64(tx.Bucket(bRefs), []byte(key)))
		return nil
	})
	return n
}

// Lease returns the current (or last) grant of (streamID, partition, kind); ok is false
// when there never was one. A released or expired lease has ExpiresMs <= ClockMs().
func (f *FSM) Lease(streamID uint64, partition int32, kind string) (l meta.Lease, ok bool, err error) {
	err = f.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bLeases).Get(leaseKey(streamID, partition, kind))
		if v == nil {
			return nil
		}
		var rec metapb.LeaseRecord
		if err := proto.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("%w: lease record: %v", ErrCorrupt, err)
		}
		l = meta.Lease{StreamID: streamID, Partition: partition, Kind: kind, Holder: rec.GetHolder(), Epoch: rec.GetEpoch(), ExpiresMs: rec.GetExpiresMs()}
		ok = true
		return nil
	})
	return l, ok, err
}

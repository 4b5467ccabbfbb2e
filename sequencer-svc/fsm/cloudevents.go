package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// The CloudEvents dedup ledger (meta.ClaimEvents, CompleteEvents, ReleaseEvents). Buckets,
// created by the first claim (so databases of format v4 without them read as an empty
// ledger and the format is unchanged):
//
//	ce_ledger         stream u64 | key [32] → metapb.EventLedgerEntry (namespace, done, claim, expires_ms, partition, offset)
//	ce_ledger_time    expires_ms u64 | stream u64 | key [32] → "" (expiry order)
//	ce_ledger_counts  ns → u64 (entries of the namespace, expired ones not yet pruned included)
//
// An entry whose expires_ms is at or before the FSM clock is expired: every command
// treats it as absent whether or not it was pruned, so pruning (at most pruneBatch per
// applied batch, oldest first, beside the WAL-commit dedupe records) never changes an
// answer. A pending entry expires DefaultEventPending (the claim's pending_ms) after its
// claim, a done one its window after completion.
//
// Bound: per namespace at most max_entries live entries (the claim's cap; a claim that
// would pass it prunes expired entries first, then is refused with ErrEventLedgerFull) of
// about 150 bytes each across both buckets, all in the bbolt file. Completion never
// refuses (the events were appended), so a namespace may pass its cap by the keys of
// claims that lapsed and were pruned before they completed. Entries of a deleted stream
// stay until they expire.
var (
	bLedger       = []byte("ce_ledger")
	bLedgerTime   = []byte("ce_ledger_time")
	bLedgerCounts = []byte("ce_ledger_counts")
)

// EventLedger wraps a ledger command in a Command.
func EventLedger(c *metapb.EventLedgerCmd) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_EventLedger{EventLedger: c}}
}

// ClaimEvents is the command that claims keys (meta.Client.ClaimEvents).
func ClaimEvents(c meta.EventClaim) *metapb.Command {
	return EventLedger(&metapb.EventLedgerCmd{Op: &metapb.EventLedgerCmd_Claim{Claim: metapb.FromEventClaim(c)}})
}

// CompleteEvents is the command that marks keys done (meta.Client.CompleteEvents).
func CompleteEvents(c meta.EventComplete) *metapb.Command {
	return EventLedger(&metapb.EventLedgerCmd{Op: &metapb.EventLedgerCmd_Complete{Complete: metapb.FromEventComplete(c)}})
}

// ReleaseEvents is the command that drops pending keys (meta.Client.ReleaseEvents).
func ReleaseEvents(r meta.EventRelease) *metapb.Command {
	return EventLedger(&metapb.EventLedgerCmd{Op: &metapb.EventLedgerCmd_Release{Release: metapb.FromEventRelease(r)}})
}

// applyEventLedger applies an EventLedgerCmd into res.
func (a *applier) applyEventLedger(c *metapb.EventLedgerCmd, res *Result) {
	switch op := c.GetOp().(type) {
	case *metapb.EventLedgerCmd_Claim:
		res.Events, res.Err = a.claimEvents(op.Claim)
	case *metapb.EventLedgerCmd_Complete:
		res.Err = a.completeEvents(op.Complete)
	case *metapb.EventLedgerCmd_Release:
		res.Err = a.releaseEvents(op.Release)
	default:
		res.Err = fmt.Errorf("%w: event ledger: unknown operation", ErrBadCommand)
	}
}

func ledgerKey(stream uint64, key meta.EventKey) []byte {
	k := make([]byte, 0, 40)
	k = binary.BigEndian.AppendUint64(k, stream)
	return append(k, key[:]...)
}

func ledgerTimeKey(expires int64, lk []byte) []byte {
	k := make([]byte, 0, 8+len(lk))
	k = binary.BigEndian.AppendUint64(k, uint64(expires))
	return append(k, lk...)
}

func (a *applier) ledgerBuckets() (entries, times, counts *bolt.Bucket) {
	var err error
	if entries, err = a.tx.CreateBucketIfNotExists(bLedger); err != nil {
		a.check(err)
	}
	if times, err = a.tx.CreateBucketIfNotExists(bLedgerTime); err != nil {
		a.check(err)
	}
	if counts, err = a.tx.CreateBucketIfNotExists(bLedgerCounts); err != nil {
		a.check(err)
	}
	return entries, times, counts
}

// getEntry returns the stored entry of lk, expired or not, or nil.
func getEntry(b *bolt.Bucket, lk []byte) *metapb.EventLedgerEntry {
	if b == nil {
		return nil
	}
	v := b.Get(lk)
	if v == nil {
		return nil
	}
	var e metapb.EventLedgerEntry
	if proto.Unmarshal(v, &e) != nil {
		return nil
	}
	return &e
}

func (a *applier) live(e *metapb.EventLedgerEntry) bool {
	return e != nil && e.GetExpiresMs() > a.clock
}

// putEntry stores e under lk, moving its expiry key from old (nil: the key is new to the
// bucket, and the namespace's count grows).
func (a *applier) putEntry(lk []byte, e, old *metapb.EventLedgerEntry) {
	entries, times, counts := a.ledgerBuckets()
	if a.err != nil {
		return
	}
	if old != nil {
		a.check(times.Delete(ledgerTimeKey(old.GetExpiresMs(), lk)))
		if old.GetNamespace() != e.GetNamespace() {
			a.addCount(counts, old.GetNamespace(), -1)
			a.addCount(counts, e.GetNamespace(), 1)
		}
	} else {
		a.addCount(counts, e.GetNamespace(), 1)
	}
	v, err := proto.Marshal(e)
	a.check(err)
	a.check(entries.Put(lk, v))
	a.check(times.Put(ledgerTimeKey(e.GetExpiresMs(), lk), nil))
}

func (a *applier) deleteEntry(lk []byte, old *metapb.EventLedgerEntry) {
	entries, times, counts := a.ledgerBuckets()
	if a.err != nil {
		return
	}
	a.check(entries.Delete(lk))
	a.check(times.Delete(ledgerTimeKey(old.GetExpiresMs(), lk)))
	a.addCount(counts, old.GetNamespace(), -1)
}

func (a *applier) addCount(counts *bolt.Bucket, ns string, d int64) {
	n := int64(getU64(counts, []byte(ns))) + d
	if n <= 0 {
		a.check(counts.Delete([]byte(ns)))
		return
	}
	a.check(putU64(counts, []byte(ns), uint64(n)))
}

func (a *applier) streamExists(id uint64) bool {
	return a.tx.Bucket(bStreamIDs).Get(u64(id)) != nil
}

func (a *applier) claimEvents(c *metapb.EventClaimCmd) ([]meta.EventClaimAnswer, error) {
	cl, err := metapb.ToEventClaim(c)
	if err == nil {
		err = meta.CheckEventClaim(cl)
	}
	if err != nil {
		return nil, err
	}
	seen := make(map[meta.EventKey]bool, len(cl.Keys))
	for i, k := range cl.Keys {
		if seen[k] {
			return nil, fmt.Errorf("%w: claim events: keys[%d] appears twice", meta.ErrInvalidArgument, i)
		}
		seen[k] = true
	}
	if !a.nsExists(cl.Namespace) {
		return nil, fmt.Errorf("claim events of %s: %w", cl.Namespace, meta.ErrNamespaceNotFound)
	}
	if !a.streamExists(cl.StreamID) {
		return nil, fmt.Errorf("claim events of stream %d: %w", cl.StreamID, meta.ErrStreamNotFound)
	}
	entries, _, counts := a.ledgerBuckets()
	if a.err != nil {
		return nil, a.err
	}
	// The cap: keys new to the bucket grow the namespace's count. When the claim would
	// pass the cap, every expired entry is pruned first, so the count is exactly the live
	// entries and the answer does not depend on how much earlier batches pruned (replicas
	// batch entries differently). The work is bounded by the expired entries, at most the
	// namespaces' caps.
	count := func() (n int64) {
		for _, k := range cl.Keys {
			if entries.Get(ledgerKey(cl.StreamID, k)) == nil {
				n++
			}
		}
		return n
	}
	if int64(getU64(counts, []byte(cl.Namespace)))+int64(len(cl.Keys)) > cl.MaxEntries {
		for a.pruneLedger(pruneBatch) == pruneBatch && a.err == nil {
		}
		if have, add := int64(getU64(counts, []byte(cl.Namespace))), count(); have+add > cl.MaxEntries {
			return nil, fmt.Errorf("claim %d events of stream %d: %w", add, cl.StreamID, &meta.EventLedgerFullError{Namespace: cl.Namespace, Max: cl.MaxEntries})
		}
	}
	out := make([]meta.EventClaimAnswer, len(cl.Keys))
	for i, k := range cl.Keys {
		lk := ledgerKey(cl.StreamID, k)
		old := getEntry(entries, lk)
		switch {
		case a.live(old) && old.GetDone():
			out[i] = meta.EventClaimAnswer{Status: meta.EventDuplicate, Partition: old.GetPartition(), Offset: old.GetOffset()}
			continue
		case a.live(old) && old.GetClaim() != cl.Claim:
			out[i] = meta.EventClaimAnswer{Status: meta.EventInFlight}
			continue
		case a.live(old): // this claim's, retried: keep its expiry
			out[i] = meta.EventClaimAnswer{Status: meta.EventClaimed}
			continue
		}
		e := &metapb.EventLedgerEntry{Namespace: cl.Namespace, Claim: cl.Claim, ExpiresMs: a.clock + cl.Pending.Milliseconds()}
		a.putEntry(lk, e, old)
		out[i] = meta.EventClaimAnswer{Status: meta.EventClaimed}
	}
	return out, nil
}

func (a *applier) completeEvents(c *metapb.EventCompleteCmd) error {
	cc, err := metapb.ToEventComplete(c)
	if err != nil {
		return err
	}
	if err := meta.CheckEventWindow(cc.Window); err != nil {
		return err
	}
	if len(cc.Done) > meta.MaxEventKeys {
		return fmt.Errorf("%w: complete events: %d keys, more than %d", meta.ErrInvalidArgument, len(cc.Done), meta.MaxEventKeys)
	}
	entries, _, _ := a.ledgerBuckets()
	if a.err != nil {
		return a.err
	}
	for _, d := range cc.Done {
		lk := ledgerKey(cc.StreamID, d.Key)
		old := getEntry(entries, lk)
		if a.live(old) && (old.GetDone() || old.GetClaim() != cc.Claim) {
			continue // another claim took the key after this one lapsed, or it is done
		}
		a.putEntry(lk, &metapb.EventLedgerEntry{Namespace: cc.Namespace, Done: true, Claim: cc.Claim,
			ExpiresMs: a.clock + cc.Window.Milliseconds(), Partition: d.Partition, Offset: d.Offset}, old)
	}
	return nil
}

func (a *applier) releaseEvents(c *metapb.EventReleaseCmd) error {
	r, err := metapb.ToEventRelease(c)
	if err != nil {
		return err
	}
	if len(r.Keys) > meta.MaxEventKeys {
		return fmt.Errorf("%w: release events: %d keys, more than %d", meta.ErrInvalidArgument, len(r.Keys), meta.MaxEventKeys)
	}
	entries := a.tx.Bucket(bLedger)
	if entries == nil {
		return nil
	}
	for _, k := range r.Keys {
		lk := ledgerKey(r.StreamID, k)
		if old := getEntry(entries, lk); old != nil && !old.GetDone() && old.GetClaim() == r.Claim {
			a.deleteEntry(lk, old)
		}
	}
	return nil
}

// pruneLedger deletes up to n expired ledger entries, oldest first, and returns how many.
func (a *applier) pruneLedger(n int) int {
	times := a.tx.Bucket(bLedgerTime)
	if times == nil {
		return 0
	}
	entries, counts := a.tx.Bucket(bLedger), a.tx.Bucket(bLedgerCounts)
	var victims [][]byte
	c := times.Cursor()
	for k, _ := c.First(); k != nil && len(victims) < n; k, _ = c.Next() {
		if len(k) != 48 || int64(binary.BigEndian.Uint64(k)) > a.clock {
			break
		}
		victims = append(victims, bytes.Clone(k))
	}
	for _, k := range victims {
		lk := k[8:]
		if e := getEntry(entries, lk); e != nil && e.GetExpiresMs() == int64(binary.BigEndian.Uint64(k)) {
			a.check(entries.Delete(lk))
			a.addCount(counts, e.GetNamespace(), -1)
		}
		a.check(times.Delete(k))
	}
	return len(victims)
}

// LedgerStats answers the ledger's entries (expired ones not yet pruned included) and
// the bytes of their keys and values in both indexes.
func (f *FSM) LedgerStats() (entries int, size int64, err error) {
	err = f.view(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bLedger, bLedgerTime} {
			b := tx.Bucket(name)
			if b == nil {
				continue
			}
			err := b.ForEach(func(k, v []byte) error {
				if bytes.Equal(name, bLedger) {
					entries++
				}
				size += int64(len(k) + len(v))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return entries, size, err
}

// LedgerCount answers the namespace's ledger entries (expired ones not yet pruned
// included).
func (f *FSM) LedgerCount(ns string) (int64, error) {
	var n int64
	err := f.view(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bLedgerCounts); b != nil {
			n = int64(getU64(b, []byte(ns)))
		}
		return nil
	})
	return n, err
}

// LedgerEntry answers a key's live ledger entry (expired entries are absent: ok false).
func (f *FSM) LedgerEntry(streamID uint64, key meta.EventKey) (e *metapb.EventLedgerEntry, ok bool, err error) {
	err = f.view(func(tx *bolt.Tx) error {
		clock := int64(getU64(tx.Bucket(bMeta), kClock))
		if got := getEntry(tx.Bucket(bLedger), ledgerKey(streamID, key)); got != nil && got.GetExpiresMs() > clock {
			e, ok = got, true
		}
		return nil
	})
	return e, ok, err
}

package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// The offset index of format v3: index blocks and pending commits (see the package doc).

// Layout parameters. They change where entries are stored, never an answer; tests lower
// them to exercise block splits and settling.
var (
	// blockEntries bounds the entries of one index block.
	blockEntries = 64
	// settleCommits is the number of pending commits that makes a CommitWal settle them
	// all into index blocks.
	settleCommits uint64 = 32
)

// decodeBlock appends the entries of index block k/v to out.
func decodeBlock(k, v []byte, out []meta.IndexEntry) ([]meta.IndexEntry, error) {
	if len(k) != 20 {
		return out, fmt.Errorf("%w: index block key of %d bytes", ErrCorrupt, len(k))
	}
	var b metapb.IndexBlock
	if err := proto.Unmarshal(v, &b); err != nil {
		return out, fmt.Errorf("%w: index block %x: %v", ErrCorrupt, k, err)
	}
	n := len(b.Count)
	if n == 0 || len(b.Kind) != n || len(b.ObjectShared) != n || len(b.ObjectSuffix) != n || len(b.Offset) != n ||
		len(b.Length) != n || len(b.MaxTsDelta) != n {
		return out, fmt.Errorf("%w: index block %x: %d entries, columns of different lengths", ErrCorrupt, k, n)
	}
	base := int64(binary.BigEndian.Uint64(k[12:]))
	var prev []byte
	var ts int64
	for i := range n {
		shared := int(b.ObjectShared[i])
		if shared > len(prev) {
			return out, fmt.Errorf("%w: index block %x: entry %d shares %d bytes of a %d-byte object key", ErrCorrupt, k, i, shared, len(prev))
		}
		obj := make([]byte, 0, shared+len(b.ObjectSuffix[i]))
		obj = append(append(obj, prev[:shared]...), b.ObjectSuffix[i]...)
		ts += b.MaxTsDelta[i]
		out = append(out, meta.IndexEntry{BaseOffset: base, Count: b.Count[i], Kind: meta.EntryKind(b.Kind[i]), Object: string(obj),
			Offset: b.Offset[i], Length: b.Length[i], MaxTimestamp: ts})
		base += b.Count[i]
		prev = obj
	}
	return out, nil
}

func encodeBlock(es []meta.IndexEntry) ([]byte, error) {
	n := len(es)
	b := &metapb.IndexBlock{Count: make([]int64, n), Kind: make([]uint32, n), ObjectShared: make([]uint32, n),
		ObjectSuffix: make([][]byte, n), Offset: make([]int64, n), Length: make([]int64, n), MaxTsDelta: make([]int64, n)}
	var prev string
	var ts int64
	var suffixes []byte // one allocation for every suffix
	shared := make([]int, n)
	for i, e := range es {
		for shared[i] < len(prev) && shared[i] < len(e.Object) && prev[shared[i]] == e.Object[shared[i]] {
			shared[i]++
		}
		suffixes = append(suffixes, e.Object[shared[i]:]...)
		prev = e.Object
	}
	off := 0
	for i, e := range es {
		end := off + len(e.Object) - shared[i]
		b.Count[i], b.Kind[i], b.Offset[i], b.Length[i] = e.Count, uint32(e.Kind), e.Offset, e.Length
		b.ObjectShared[i], b.ObjectSuffix[i] = uint32(shared[i]), suffixes[off:end:end]
		off = end
		b.MaxTsDelta[i] = e.MaxTimestamp - ts
		ts = e.MaxTimestamp
	}
	return proto.Marshal(b)
}

// pendingChunks calls fn with the object and every chunk of the pending commit v (key: its
// Raft index) and the base offset it was assigned, in chunk order, until fn returns false.
func pendingChunks(k, v []byte, fn func(object string, ch meta.Chunk, base int64) bool) error {
	var pc metapb.PendingCommit
	if err := proto.Unmarshal(v, &pc); err != nil {
		return fmt.Errorf("%w: pending commit %x: %v", ErrCorrupt, k, err)
	}
	c, err := DecodeCommitWal(pc.GetCommit())
	if err != nil || len(pc.Base) != len(c.Chunks) {
		return fmt.Errorf("%w: pending commit %x: %d bases for %d chunks (%v)", ErrCorrupt, k, len(pc.Base), len(c.Chunks), err)
	}
	for i, ch := range c.Chunks {
		if !fn(c.Object, ch, pc.Base[i]) {
			break
		}
	}
	return nil
}

func chunkEntry(object string, ch meta.Chunk, base int64) meta.IndexEntry {
	return meta.IndexEntry{BaseOffset: base, Count: ch.Records, Kind: meta.KindWAL, Object: object,
		Offset: ch.Offset, Length: ch.Length, MaxTimestamp: ch.MaxTimestamp}
}

// readEntries returns up to max entries of partition (id, p) that end after from and start
// before to, in offset order: those in index blocks, then those of pending commits (base
// offset at or above settled).
func readEntries(tx *bolt.Tx, id uint64, p int32, settled, from, to int64, max int) ([]meta.IndexEntry, error) {
	var out []meta.IndexEntry
	pk := partKey(id, p)
	if from < settled {
		c := tx.Bucket(bBlocks).Cursor()
		k, v := c.Seek(indexKey(id, p, from))
		if k == nil || !bytes.HasPrefix(k, pk) || int64(binary.BigEndian.Uint64(k[12:])) > from {
			// The block holding from starts below it: step back, unless that leaves the
			// partition.
			if pk2, pv2 := c.Prev(); pk2 != nil && bytes.HasPrefix(pk2, pk) {
				k, v = pk2, pv2
			} else {
				k, v = c.Seek(indexKey(id, p, from))
			}
		}
		var es []meta.IndexEntry
		for ; k != nil && bytes.HasPrefix(k, pk) && len(out) < max; k, v = c.Next() {
			if int64(binary.BigEndian.Uint64(k[12:])) >= to {
				return out, nil
			}
			var err error
			if es, err = decodeBlock(k, v, es[:0]); err != nil {
				return nil, err
			}
			for _, e := range es {
				if e.End() > from && e.BaseOffset < to && len(out) < max {
					out = append(out, e)
				}
			}
		}
	}
	if len(out) >= max || to <= settled {
		return out, nil
	}
	c := tx.Bucket(bPending).Cursor()
	for k, v := c.First(); k != nil && len(out) < max; k, v = c.Next() {
		err := pendingChunks(k, v, func(object string, ch meta.Chunk, base int64) bool {
			if ch.StreamID != id || ch.Partition != p || base < settled || base+ch.Records <= from || base >= to {
				return true
			}
			out = append(out, chunkEntry(object, ch, base))
			return len(out) < max
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// putPending records an applied commit's chunks and bases as pending, and settles every
// pending commit once there are settleCommits of them.
func (a *applier) putPending(key []byte, w *metapb.CommitWalCmd, bases []int64) {
	v, err := proto.Marshal(&metapb.PendingCommit{Commit: w, Base: bases})
	a.check(err)
	a.check(a.tx.Bucket(bPending).Put(key, v))
	m := a.tx.Bucket(bMeta)
	n := getU64(m, kPendingN) + 1
	a.check(putU64(m, kPendingN, n))
	if n >= settleCommits {
		a.settleAll()
	}
}

// settleAll moves the entries of every pending commit into index blocks and deletes the
// pending commits. Chunks of deleted partitions, or below their partition's settled
// offset, are skipped.
func (a *applier) settleAll() {
	type pkey struct {
		id uint64
		p  int32
	}
	per := map[pkey][]meta.IndexEntry{}
	var keys [][]byte
	c := a.tx.Bucket(bPending).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		err := pendingChunks(k, v, func(object string, ch meta.Chunk, base int64) bool {
			pk := pkey{ch.StreamID, ch.Partition}
			per[pk] = append(per[pk], chunkEntry(object, ch, base))
			return true
		})
		if err != nil {
			a.check(err)
			return
		}
		keys = append(keys, bytes.Clone(k))
	}
	parts := make([]pkey, 0, len(per))
	for pk := range per {
		parts = append(parts, pk)
	}
	slices.SortFunc(parts, func(x, y pkey) int {
		if x.id != y.id {
			return cmp.Compare(x.id, y.id)
		}
		return cmp.Compare(x.p, y.p)
	})
	for _, pk := range parts {
		id, p := pk.id, pk.p
		rec, err := a.partition(id, p)
		if err != nil {
			continue // deleted: its references were released then
		}
		es := per[pk]
		i := 0
		for i < len(es) && es[i].BaseOffset < rec.GetSettled() {
			i++
		}
		a.appendBlocks(id, p, es[i:])
		rec.Settled = rec.GetHighWatermark()
		a.putPartition(id, p, rec)
	}
	a.deleteKeys(a.tx.Bucket(bPending), keys)
	a.check(putU64(a.tx.Bucket(bMeta), kPendingN, 0))
}

// settlePartition moves one partition's pending entries into index blocks (the pending
// commits stay: their chunks of this partition are below its settled offset from now on).
// The caller writes rec.
func (a *applier) settlePartition(id uint64, p int32, rec *metapb.PartitionRecord) {
	if rec.GetSettled() >= rec.GetHighWatermark() {
		return
	}
	es, err := readEntries(a.tx, id, p, rec.GetSettled(), rec.GetSettled(), math.MaxInt64, math.MaxInt)
	if err != nil {
		a.check(err)
		return
	}
	a.appendBlocks(id, p, es)
	rec.Settled = rec.GetHighWatermark()
}

// appendBlocks writes entries (contiguous, after every entry in the partition's blocks)
// as new blocks. The partition's last block is not filled up: reading and rewriting it
// would cost more than a settle saves.
func (a *applier) appendBlocks(id uint64, p int32, es []meta.IndexEntry) {
	a.putBlocks(id, p, es)
}

// putBlocks writes entries as blocks of at most blockEntries.
func (a *applier) putBlocks(id uint64, p int32, es []meta.IndexEntry) {
	for len(es) > 0 {
		n := min(blockEntries, len(es))
		a.putBlockOf(id, p, es[:n])
		es = es[n:]
	}
}

func (a *applier) putBlockOf(id uint64, p int32, es []meta.IndexEntry) {
	v, err := encodeBlock(es)
	a.check(err)
	a.check(a.tx.Bucket(bBlocks).Put(indexKey(id, p, es[0].BaseOffset), v))
}

// replaceRange replaces the partition's block entries in [from, to) (entry boundaries) by
// repl: the blocks overlapping the range are deleted and their entries outside it written
// again with repl, in blocks of at most blockEntries.
func (a *applier) replaceRange(id uint64, p int32, from, to int64, repl []meta.IndexEntry) {
	pk := partKey(id, p)
	bb := a.tx.Bucket(bBlocks)
	c := bb.Cursor()
	k, v := c.Seek(indexKey(id, p, from))
	if k == nil || !bytes.HasPrefix(k, pk) || int64(binary.BigEndian.Uint64(k[12:])) > from {
		if pk2, pv2 := c.Prev(); pk2 != nil && bytes.HasPrefix(pk2, pk) {
			k, v = pk2, pv2
		} else {
			k, v = c.Seek(indexKey(id, p, from))
		}
	}
	var old []meta.IndexEntry
	var keys [][]byte
	for ; k != nil && bytes.HasPrefix(k, pk) && int64(binary.BigEndian.Uint64(k[12:])) < to; k, v = c.Next() {
		var err error
		if old, err = decodeBlock(k, v, old); err != nil {
			a.check(err)
			return
		}
		keys = append(keys, bytes.Clone(k))
	}
	a.deleteKeys(bb, keys)
	var out []meta.IndexEntry
	for _, e := range old {
		if e.End() <= from {
			out = append(out, e)
		}
	}
	out = append(out, repl...)
	for _, e := range old {
		if e.BaseOffset >= to {
			out = append(out, e)
		}
	}
	a.putBlocks(id, p, out)
}

// migrateV2 turns a v2 database into v3 inside tx: the index entries go into index blocks,
// the partition records into partition groups (every partition settled), and the index
// and partitions buckets go.
func migrateV2(tx *bolt.Tx) error {
	for _, b := range [][]byte{bBlocks, bPending, bGroups} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	a := &applier{tx: tx}
	var run []meta.IndexEntry
	var runKey []byte
	flush := func() {
		if len(run) > 0 {
			id, p := binary.BigEndian.Uint64(runKey), int32(binary.BigEndian.Uint32(runKey[8:]))
			a.putBlocks(id, p, run)
		}
		run = run[:0]
	}
	err := tx.Bucket(bIndex).ForEach(func(k, v []byte) error {
		e, err := decodeIndex(k, v)
		if err != nil {
			return err
		}
		if runKey == nil || !bytes.Equal(runKey, k[:12]) {
			flush()
			runKey = bytes.Clone(k[:12])
		}
		run = append(run, e)
		return nil
	})
	if err != nil {
		return err
	}
	flush()
	if _, err := tx.CreateBucketIfNotExists(bGroups); err != nil {
		return err
	}
	err = tx.Bucket(bParts).ForEach(func(k, v []byte) error {
		rec, err := decodePartitionRecord(k, v)
		if err != nil || len(k) != 12 {
			return fmt.Errorf("%w: partition record %x: %v", ErrCorrupt, k, err)
		}
		id, p := binary.BigEndian.Uint64(k), int32(binary.BigEndian.Uint32(k[8:]))
		a.addPartitions(id, p, p+1)
		rec.Settled = rec.HighWatermark
		a.putPartition(id, p, rec)
		return a.err
	})
	if err != nil {
		return err
	}
	a.flushGroups()
	if a.err != nil {
		return a.err
	}
	for _, b := range [][]byte{bIndex, bParts} {
		if err := tx.DeleteBucket(b); err != nil {
			return err
		}
	}
	return tx.Bucket(bMeta).Put(kFormat, []byte(formatV3))
}

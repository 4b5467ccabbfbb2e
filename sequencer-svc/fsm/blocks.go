package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The offset index of format v3: index blocks and pending commits (see the package doc).

// Layout parameters. They change where entries are stored, never an answer; tests lower
// them to exercise block splits and settling.
var (
	// blockEntries bounds the entries of one index block.
	blockEntries = 512
	// settleCommits bounds the pending records: when a commit leaves this many, the
	// partitions holding the oldest one's chunks are settled (tail.go).
	settleCommits uint64 = 1024
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
	return appendBlock(make([]byte, 0, 24*len(es)+64), es), nil
}

// appendBlock appends the metapb.IndexBlock of es to buf, written field by field with
// protowire: the same bytes proto.Marshal makes of it (TestAppendBlockIsProtoMarshal),
// without building the message.
func appendBlock(buf []byte, es []meta.IndexEntry) []byte {
	n := len(es)
	if n == 0 {
		return buf
	}
	var sharedBuf [512]uint32
	shared := sharedBuf[:0]
	if n > len(sharedBuf) {
		shared = make([]uint32, 0, n)
	}
	prev := ""
	for i := range es {
		o := es[i].Object
		k := 0
		for k < len(prev) && k < len(o) && prev[k] == o[k] {
			k++
		}
		shared = append(shared, uint32(k))
		prev = o
	}
	// Packed fields: tag, byte length, varints; each column goes through col.
	var colBuf [512]uint64
	col := colBuf[:0]
	if n > len(colBuf) {
		col = make([]uint64, 0, n)
	}
	col = col[:n]
	for i := range es {
		col[i] = uint64(es[i].Count)
	}
	buf = appendPacked(buf, 1, col)
	for i := range es {
		col[i] = uint64(uint32(es[i].Kind))
	}
	buf = appendPacked(buf, 2, col)
	for i, k := range shared {
		col[i] = uint64(k)
	}
	buf = appendPacked(buf, 3, col)
	for i := range es {
		buf = protowire.AppendTag(buf, 4, protowire.BytesType)
		buf = protowire.AppendString(buf, es[i].Object[shared[i]:])
	}
	for i := range es {
		col[i] = uint64(es[i].Offset)
	}
	buf = appendPacked(buf, 5, col)
	for i := range es {
		col[i] = uint64(es[i].Length)
	}
	buf = appendPacked(buf, 6, col)
	var ts int64
	for i := range es {
		col[i] = protowire.EncodeZigZag(es[i].MaxTimestamp - ts)
		ts = es[i].MaxTimestamp
	}
	buf = appendPacked(buf, 7, col)
	return buf
}

// appendPacked appends a packed repeated varint field.
func appendPacked(buf []byte, num protowire.Number, vals []uint64) []byte {
	size := 0
	for _, v := range vals {
		size += protowire.SizeVarint(v)
	}
	buf = protowire.AppendTag(buf, num, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	for _, v := range vals {
		buf = protowire.AppendVarint(buf, v)
	}
	return buf
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

// seekBlock positions c at partition (id, p)'s block holding offset from: the last one
// starting at or below it, else the partition's first block after it (k is nil or of
// another partition when there is none).
func seekBlock(c *bolt.Cursor, id uint64, p int32, from int64) (k, v []byte) {
	pk := partKey(id, p)
	k, v = c.Seek(indexKey(id, p, from))
	if k == nil || !bytes.HasPrefix(k, pk) || int64(binary.BigEndian.Uint64(k[12:])) > from {
		// The block holding from starts below it: step back, unless that leaves the
		// partition.
		if pk2, pv2 := c.Prev(); pk2 != nil && bytes.HasPrefix(pk2, pk) {
			return pk2, pv2
		}
		return c.Seek(indexKey(id, p, from))
	}
	return k, v
}

// readEntries returns up to max entries of partition (id, p) that end after from and start
// before to, in offset order: those in index blocks, then those of its tail (the pending
// entries, at or above settled).
func readEntries(tx *bolt.Tx, id uint64, p int32, settled int64, tail []meta.IndexEntry, from, to int64, max int) ([]meta.IndexEntry, error) {
	var out []meta.IndexEntry
	pk := partKey(id, p)
	if from < settled {
		c := tx.Bucket(bBlocks).Cursor()
		k, v := seekBlock(c, id, p, from)
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
	// The tail is in offset order: skip to the first entry ending after from.
	i, j := 0, len(tail)
	for i < j {
		h := int(uint(i+j) >> 1)
		if tail[h].End() <= from {
			i = h + 1
		} else {
			j = h
		}
	}
	for _, e := range tail[i:] {
		if len(out) >= max || e.BaseOffset >= to {
			break
		}
		if e.BaseOffset >= settled {
			out = append(out, e)
		}
	}
	return out, nil
}

// putPending records an applied commit's chunks and bases as a pending record.
func (a *applier) putPending(key []byte, w *metapb.CommitWalCmd, bases []int64) {
	v, err := proto.Marshal(&metapb.PendingCommit{Commit: w, Base: bases})
	a.check(err)
	a.check(a.tx.Bucket(bPending).Put(key, v))
}

// settlePartition moves one partition's tail into index blocks. The caller writes rec.
func (a *applier) settlePartition(id uint64, p int32, rec *metapb.PartitionRecord) {
	a.settleTail(pkey{id, p})
	rec.Settled = rec.GetHighWatermark()
}

// appendBlocks writes entries (contiguous, after every entry in the partition's blocks)
// as new blocks. A short run is merged into the partition's last block when that block
// ends where the run starts and both fit in one; a long run is not (reading and rewriting
// the last block would cost more than it saves).
func (a *applier) appendBlocks(id uint64, p int32, es []meta.IndexEntry) {
	if len(es) > 0 && len(es) < blockEntries/2 {
		pk := partKey(id, p)
		c := a.tx.Bucket(bBlocks).Cursor()
		k, v := c.Seek(indexKey(id, p, es[0].BaseOffset))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		if k != nil && bytes.HasPrefix(k, pk) {
			last, err := decodeBlock(k, v, nil)
			if err != nil {
				a.check(err)
				return
			}
			if n := len(last); n+len(es) <= blockEntries && last[n-1].End() == es[0].BaseOffset {
				a.check(a.tx.Bucket(bBlocks).Delete(bytes.Clone(k)))
				a.putBlocks(id, p, append(last, es...))
				return
			}
		}
	}
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
	v := appendBlock(make([]byte, 0, 24*len(es)+64), es)
	a.check(a.tx.Bucket(bBlocks).Put(indexKey(id, p, es[0].BaseOffset), v))
}

// replaceRange replaces the partition's block entries in [from, to) (entry boundaries) by
// repl: the blocks overlapping the range are deleted and their entries outside it written
// again with repl, in blocks of at most blockEntries.
func (a *applier) replaceRange(id uint64, p int32, from, to int64, repl []meta.IndexEntry) {
	pk := partKey(id, p)
	bb := a.tx.Bucket(bBlocks)
	c := bb.Cursor()
	k, v := seekBlock(c, id, p, from)
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

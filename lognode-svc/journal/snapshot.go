package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"

	"github.com/loamhq/loam/shared/meta"
)

// ErrBadSnapshot: a journal snapshot does not decode.
var ErrBadSnapshot = errors.New("journal: bad snapshot")

var (
	snapMagic   = [8]byte{'L', 'O', 'A', 'M', 'J', 'N', 'L', '2'}
	snapMagicV1 = [8]byte{'L', 'O', 'A', 'M', 'J', 'N', 'L', '1'}
)

// Snapshot layout (big-endian), what a member restores from:
//
//	8   magic "LOAMJNL2" (version 1, "LOAMJNL1", is read too: it has no sealed partitions)
//	i64 clock
//	u32 partitions, sorted by (stream, partition), each:
//	    u64 stream, u32 partition, i64 start, i64 next
//	    u32 segments, each: i64 base, i64 end, u16 k, k bytes of object key
//	    u32 entries, each: i64 base, i64 count, u32 n, n bytes of batches (offsets written in)
//	u32 producer states, least recently used first, each:
//	    i64 producer id, u64 stream, u32 partition, i16 epoch, i64 last ms,
//	    u8 c (<= meta.ProducerBatches), c x (i32 first sequence, i32 last sequence, i64 base offset)
//	u32 request ids, oldest first, each: u64 id, i64 base, i64 count, u8 duplicate, i64 ms
//	u32 sealed partitions (version 2 only), sorted, each: u64 stream, u32 partition
//	u32 CRC-32C of everything before it
//
// Its size is the retained batches (bounded, see the package doc) plus about 30 bytes per
// partition and 100 per producer state.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteSnapshot writes s to w.
func (s *State) WriteSnapshot(w io.Writer) error {
	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	var buf [64]byte
	put := func(b []byte) { _, _ = bw.Write(b) }
	u64 := func(v uint64) { put(binary.BigEndian.AppendUint64(buf[:0], v)) }
	u32 := func(v uint32) { put(binary.BigEndian.AppendUint32(buf[:0], v)) }
	put(snapMagic[:])
	u64(uint64(s.clock))
	keys := make([]Partition, 0, len(s.parts))
	for k := range s.parts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Stream != keys[j].Stream {
			return keys[i].Stream < keys[j].Stream
		}
		return keys[i].Partition < keys[j].Partition
	})
	u32(uint32(len(keys)))
	for _, k := range keys {
		pt := s.parts[k]
		u64(k.Stream)
		u32(k.Partition)
		u64(uint64(pt.start))
		u64(uint64(pt.next))
		u32(uint32(len(pt.segments)))
		for _, g := range pt.segments {
			u64(uint64(g.Base))
			u64(uint64(g.End))
			put(binary.BigEndian.AppendUint16(buf[:0], uint16(len(g.Key))))
			put([]byte(g.Key))
		}
		u32(uint32(len(pt.entries)))
		for _, e := range pt.entries {
			u64(uint64(e.base))
			u64(uint64(e.count))
			u32(uint32(len(e.data)))
			put(e.data)
		}
	}
	u32(uint32(s.lru.Len()))
	for e := s.lru.Front(); e != nil; e = e.Next() {
		ps := e.Value.(*prodState)
		u64(uint64(ps.key.id))
		u64(ps.key.Stream)
		u32(ps.key.Partition.Partition)
		put(binary.BigEndian.AppendUint16(buf[:0], uint16(ps.epoch)))
		u64(uint64(ps.lastMs))
		put([]byte{byte(len(ps.first))})
		for j := range ps.first {
			u32(uint32(ps.first[j]))
			u32(uint32(ps.last[j]))
			u64(uint64(ps.base[j]))
		}
	}
	u32(uint32(len(s.reqQ) - s.reqHead))
	for _, id := range s.reqQ[s.reqHead:] {
		r := s.reqs[id]
		u64(id)
		u64(uint64(r.base))
		u64(uint64(r.count))
		dup := byte(0)
		if r.dup {
			dup = 1
		}
		put([]byte{dup})
		u64(uint64(r.ms))
	}
	var sealed []Partition
	for _, k := range keys {
		if s.parts[k].sealed {
			sealed = append(sealed, k)
		}
	}
	u32(uint32(len(sealed)))
	for _, k := range sealed {
		u64(k.Stream)
		u32(k.Partition)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("journal: write snapshot: %w", err)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, h.Sum32())); err != nil {
		return fmt.Errorf("journal: write snapshot: %w", err)
	}
	return nil
}

// snapReader decodes a snapshot held in memory.
type snapReader struct {
	b   []byte
	at  int
	err error
}

func (r *snapReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.at < n {
		r.err = fmt.Errorf("%w: %s at byte %d: need %d bytes, %d left", ErrBadSnapshot, what, r.at, n, len(r.b)-r.at)
		return nil
	}
	v := r.b[r.at : r.at+n]
	r.at += n
	return v
}

func (r *snapReader) u64(what string) uint64 {
	if v := r.take(8, what); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *snapReader) u32(what string) uint32 {
	if v := r.take(4, what); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *snapReader) u16(what string) uint16 {
	if v := r.take(2, what); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// count reads a u32 count of items of at least min bytes each, refusing one the bytes
// left cannot hold (so a corrupt count allocates nothing).
func (r *snapReader) count(what string, min int) int {
	n := r.u32(what)
	if r.err == nil && uint64(n)*uint64(min) > uint64(len(r.b)-r.at) {
		r.err = fmt.Errorf("%w: %s %d at byte %d: %d bytes left hold fewer", ErrBadSnapshot, what, n, r.at-4, len(r.b)-r.at)
		return 0
	}
	return int(n)
}

// ReadSnapshot decodes a snapshot written by WriteSnapshot into a new State bounded to
// maxProducers producer states (<= 0: DefaultMaxProducerStates).
func ReadSnapshot(b []byte, maxProducers int) (*State, error) {
	if len(b) < len(snapMagic)+4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	body := b[:len(b)-4]
	if want, got := binary.BigEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("%w: crc 0x%08x stored, 0x%08x computed", ErrBadSnapshot, want, got)
	}
	r := &snapReader{b: body}
	m := r.take(8, "magic")
	v2 := string(m) == string(snapMagic[:])
	if !v2 && string(m) != string(snapMagicV1[:]) {
		return nil, fmt.Errorf("%w: magic %q, want %q or %q", ErrBadSnapshot, m, snapMagic[:], snapMagicV1[:])
	}
	s := NewState(maxProducers)
	s.clock = int64(r.u64("clock"))
	np := r.count("partitions", 36)
	var prev *Partition
	for i := 0; i < np && r.err == nil; i++ {
		k := Partition{Stream: r.u64("stream"), Partition: r.u32("partition")}
		if prev != nil && (k.Stream < prev.Stream || (k.Stream == prev.Stream && k.Partition <= prev.Partition)) {
			return nil, fmt.Errorf("%w: %s out of order after %s", ErrBadSnapshot, k, *prev)
		}
		prev = &k
		pt := &partState{start: int64(r.u64("start")), next: int64(r.u64("next"))}
		if r.err == nil && (pt.start < 0 || pt.next < pt.start) {
			return nil, fmt.Errorf("%w: %s start %d next %d", ErrBadSnapshot, k, pt.start, pt.next)
		}
		ns := r.count("segments", 18)
		for j := 0; j < ns && r.err == nil; j++ {
			g := SegmentRef{Base: int64(r.u64("segment base")), End: int64(r.u64("segment end"))}
			g.Key = string(r.take(int(r.u16("segment key length")), "segment key"))
			pt.segments = append(pt.segments, g)
		}
		ne := r.count("entries", 20)
		at := pt.start
		for j := 0; j < ne && r.err == nil; j++ {
			e := stored{base: int64(r.u64("entry base")), count: int64(r.u64("entry count"))}
			e.data = append([]byte(nil), r.take(int(r.u32("entry length")), "entry batches")...)
			if r.err != nil {
				break
			}
			if e.base < at || e.count <= 0 || e.base+e.count > pt.next || len(e.data) == 0 {
				return nil, fmt.Errorf("%w: %s entry %d: offsets [%d, %d) of %d bytes, after %d, next %d",
					ErrBadSnapshot, k, j, e.base, e.base+e.count, len(e.data), at, pt.next)
			}
			at = e.base + e.count
			pt.entries = append(pt.entries, e)
			pt.bytes += int64(len(e.data))
		}
		s.retained += pt.bytes
		s.parts[k] = pt
	}
	npr := r.count("producer states", 35)
	for i := 0; i < npr && r.err == nil; i++ {
		ps := &prodState{key: prodKey{id: int64(r.u64("producer id")), Partition: Partition{Stream: r.u64("producer stream"), Partition: r.u32("producer partition")}}}
		ps.epoch = int16(r.u16("producer epoch"))
		ps.lastMs = int64(r.u64("producer last ms"))
		c := r.take(1, "producer batches")
		if r.err != nil {
			break
		}
		if int(c[0]) > meta.ProducerBatches {
			return nil, fmt.Errorf("%w: producer %d holds %d batches, at most %d", ErrBadSnapshot, ps.key.id, c[0], meta.ProducerBatches)
		}
		for j := 0; j < int(c[0]); j++ {
			ps.first = append(ps.first, int32(r.u32("first sequence")))
			ps.last = append(ps.last, int32(r.u32("last sequence")))
			ps.base = append(ps.base, int64(r.u64("base offset")))
		}
		if r.err != nil {
			break
		}
		if _, dup := s.prods[ps.key]; dup || ps.key.id <= 0 {
			return nil, fmt.Errorf("%w: producer state %d of %s repeated or invalid", ErrBadSnapshot, ps.key.id, ps.key.Partition)
		}
		ps.elem = s.lru.PushBack(ps)
		s.prods[ps.key] = ps
	}
	nr := r.count("request ids", 33)
	for i := 0; i < nr && r.err == nil; i++ {
		q := reqRec{id: r.u64("request id"), base: int64(r.u64("request base")), count: int64(r.u64("request count"))}
		d := r.take(1, "request duplicate")
		q.ms = int64(r.u64("request ms"))
		if r.err != nil {
			break
		}
		if _, dup := s.reqs[q.id]; dup || q.id == 0 || d[0] > 1 {
			return nil, fmt.Errorf("%w: request id %d repeated, zero or with duplicate flag %d", ErrBadSnapshot, q.id, d[0])
		}
		q.dup = d[0] == 1
		s.reqs[q.id] = q
		s.reqQ = append(s.reqQ, q.id)
	}
	if v2 {
		ns := r.count("sealed partitions", 12)
		for i := 0; i < ns && r.err == nil; i++ {
			k := Partition{Stream: r.u64("sealed stream"), Partition: r.u32("sealed partition")}
			pt := s.parts[k]
			if r.err == nil && pt == nil {
				return nil, fmt.Errorf("%w: sealed %s is not among the partitions", ErrBadSnapshot, k)
			}
			if pt != nil {
				pt.sealed = true
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.at != len(body) {
		return nil, fmt.Errorf("%w: %d bytes after the request ids", ErrBadSnapshot, len(body)-r.at)
	}
	for len(s.prods) > s.maxProducers {
		s.dropProducer(s.lru.Front().Value.(*prodState))
	}
	return s, nil
}

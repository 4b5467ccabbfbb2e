package segfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

// randomSegment returns the header and batches of a random segment: some batches with
// gaps before them, some compacted (offset gaps inside), some empty, some compressed.
func randomSegment(t testing.TB, rng *rand.Rand) (Header, [][]byte) {
	h := Header{Encoding: EncodingKafka, StreamID: rng.Uint64(), Partition: rng.Int32N(64), CreatedMs: 1732870000000 + rng.Int64N(1e9)}
	next := rng.Int64N(1 << 40)
	explicit := rng.IntN(3) == 0
	if explicit {
		h.BaseOffset = next
		next += rng.Int64N(5)
	}
	var batches [][]byte
	for range 1 + rng.IntN(12) {
		if rng.IntN(3) == 0 {
			next += 1 + rng.Int64N(50) // whole batches removed
		}
		s := batchSpec{base: next, ts: 1732870000000 + rng.Int64N(1e6) - 5e5, value: rng.IntN(300)}
		switch rng.IntN(5) {
		case 0:
			s.empty, s.count = true, 1+rng.IntN(20)
		case 1:
			d := int32(0)
			for range 1 + rng.IntN(6) {
				d += int32(rng.IntN(4))
				s.deltas = append(s.deltas, d)
				d++
			}
		default:
			s.count = 1 + rng.IntN(8)
		}
		if rng.IntN(6) == 0 {
			s.codec = recordbatch.Compression(1 + rng.IntN(4))
		}
		raw := s.build(t)
		batches = append(batches, raw)
		b, _, err := recordbatch.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		next += b.OffsetCount()
	}
	if explicit {
		h.EndOffset = next + rng.Int64N(5)
	}
	return h, batches
}

func buildAll(t testing.TB, specs []batchSpec) [][]byte {
	out := make([][]byte, len(specs))
	for i, s := range specs {
		out[i] = s.build(t)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 100 {
		h, batches := randomSegment(t, rng)
		obj, info := buildSegment(t, h, batches)

		// The header Finish computed.
		parsed := make([]recordbatch.Batch, len(batches))
		want := h
		want.MinTimestamp, want.MaxTimestamp = math.MaxInt64, math.MinInt64
		for i, b := range batches {
			p, _, err := recordbatch.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			parsed[i] = p
			want.BatchCount++
			want.OffsetCount += p.OffsetCount()
			want.RecordCount += int64(p.NumRecords)
			want.MinTimestamp = min(want.MinTimestamp, p.FirstTimestamp)
			want.MaxTimestamp = max(want.MaxTimestamp, p.MaxTimestamp)
		}
		if h.EndOffset == 0 {
			want.BaseOffset = parsed[0].BaseOffset
			want.EndOffset = parsed[len(parsed)-1].LastOffset() + 1
		}
		if info.Header != want {
			t.Fatalf("iter %d: header\n got %+v\nwant %+v", iter, info.Header, want)
		}
		if info.Size != int64(len(obj)) || info.DataOffset != HeaderSize || info.IndexOffset()+int64(HeaderSize+SectionHeaderSize+4+IndexEntrySize*len(batches)+TrailerSize) != info.Size {
			t.Fatalf("iter %d: sizes %+v for %d bytes", iter, info, len(obj))
		}
		for i, r := range info.Batches {
			if !bytes.Equal(obj[r.Offset:r.Offset+int64(r.Length)], batches[i]) {
				t.Fatalf("iter %d: batch %d not stored verbatim", iter, i)
			}
			if r.BaseOffset != parsed[i].BaseOffset || r.Count != parsed[i].OffsetCount() || r.MaxTimestamp != parsed[i].MaxTimestamp {
				t.Fatalf("iter %d: batch %d ref %+v", iter, i, r)
			}
		}
		if _, n := info.Span(0, len(batches)); !bytes.Equal(obj[info.DataOffset:info.IndexOffset()], bytes.Join(batches, nil)) || n != info.DataLength {
			t.Fatalf("iter %d: data region is not the batches back to back", iter)
		}

		d, err := Decode(obj)
		if err != nil {
			t.Fatalf("iter %d: Decode: %v", iter, err)
		}
		if !equalInfo(d, &info) {
			t.Fatalf("iter %d: Decode\n %+v\nFinish\n %+v", iter, d, info)
		}
		rr := &countingReader{RangeReader: memReader{"k": obj}}
		ri, err := ReadInfo(t.Context(), rr, "k", int64(len(obj)))
		if err != nil || !equalInfo(ri, &info) || rr.reads.Load() != 1 {
			t.Fatalf("iter %d: ReadInfo (%d reads): %v\n %+v", iter, rr.reads.Load(), err, ri)
		}
		rr.reads.Store(0)
		ra, err := ReadInfoAt(t.Context(), rr, "k", info.DataOffset+info.DataLength)
		if err != nil || !equalInfo(ra, &info) || rr.reads.Load() != 1 {
			t.Fatalf("iter %d: ReadInfoAt (%d reads): %v", iter, rr.reads.Load(), err)
		}
		checkFind(t, &info)
		checkReadBatches(t, rr, &info, obj)
	}
}

// checkFind compares Find with a linear scan at every offset of the segment's range and
// a little around it.
func checkFind(t *testing.T, info *Info) {
	t.Helper()
	for off := info.Header.BaseOffset - 3; off < info.Header.EndOffset+3; off++ {
		wantI, wantOK := len(info.Batches), false
		for i, r := range info.Batches {
			if r.End() > off {
				wantI, wantOK = i, r.BaseOffset <= off
				break
			}
		}
		if i, ok := info.Find(off); i != wantI || ok != wantOK {
			t.Fatalf("Find(%d) = %d, %v; want %d, %v", off, i, ok, wantI, wantOK)
		}
	}
}

// checkReadBatches fetches from every batch's base offset with a few byte limits.
func checkReadBatches(t *testing.T, rr *countingReader, info *Info, obj []byte) {
	t.Helper()
	for i, r := range info.Batches {
		for _, maxBytes := range []int64{0, int64(r.Length), int64(r.Length) + 200, 1 << 30} {
			rr.reads.Store(0)
			got, err := ReadBatches(t.Context(), rr, "k", info, r.BaseOffset, maxBytes)
			if err != nil {
				t.Fatalf("ReadBatches(%d, %d): %v", r.BaseOffset, maxBytes, err)
			}
			// Expected: batches from i while the total stays within maxBytes, at least one.
			to, total := i+1, int64(r.Length)
			for to < len(info.Batches) && total+int64(info.Batches[to].Length) <= maxBytes {
				total += int64(info.Batches[to].Length)
				to++
			}
			off, n := info.Span(i, to)
			if !bytes.Equal(got, obj[off:off+n]) || rr.reads.Load() != 1 {
				t.Fatalf("ReadBatches(%d, %d): %d bytes in %d reads, want batches [%d, %d)", r.BaseOffset, maxBytes, len(got), rr.reads.Load(), i, to)
			}
		}
	}
	got, err := ReadBatches(t.Context(), rr, "k", info, info.Batches[len(info.Batches)-1].End(), 1<<20)
	if got != nil || err != nil {
		t.Fatalf("ReadBatches past the last batch: %d bytes, %v", len(got), err)
	}
}

// TestGaps builds a compacted segment by hand and checks where every offset resolves.
func TestGaps(t *testing.T) {
	specs := []batchSpec{
		{base: 103, deltas: []int32{0, 2, 5}, ts: 1000},     // offsets 103..108, records at 103, 105, 108
		{base: 120, count: 2, ts: 900},                      // 120..121
		{base: 150, empty: true, count: 10, ts: 2000},       // 150..159, no records
		{base: 160, deltas: []int32{3}, ts: 1500, value: 9}, // 160..163, one record at 163
	}
	obj, info := buildSegment(t, Header{Encoding: EncodingKafka, StreamID: 42, Partition: 7, BaseOffset: 100, EndOffset: 200, CreatedMs: 5}, buildAll(t, specs))
	h := info.Header
	if h.BaseOffset != 100 || h.EndOffset != 200 || h.BatchCount != 4 || h.OffsetCount != 6+2+10+4 || h.RecordCount != 3+2+0+1 ||
		h.MinTimestamp != 900 || h.MaxTimestamp != 2005 {
		t.Fatalf("header %+v", h)
	}
	cases := []struct {
		off  int64
		i    int
		hold bool
	}{
		{0, 0, false}, {100, 0, false}, {103, 0, true}, {104, 0, true}, {108, 0, true},
		{109, 1, false}, {119, 1, false}, {121, 1, true}, {122, 2, false},
		{150, 2, true}, {159, 2, true}, {160, 3, true}, {163, 3, true}, {164, 4, false}, {199, 4, false}, {1 << 62, 4, false},
	}
	for _, c := range cases {
		if i, ok := info.Find(c.off); i != c.i || ok != c.hold {
			t.Errorf("Find(%d) = %d, %v; want %d, %v", c.off, i, ok, c.i, c.hold)
		}
	}
	d, err := Decode(obj)
	if err != nil || !equalInfo(d, &info) {
		t.Fatalf("Decode: %v", err)
	}
	// A fetch in the gap before batch 1 gets batch 1 onwards.
	got, err := ReadBatches(t.Context(), memReader{"k": obj}, "k", d, 110, 1<<20)
	if off, n := d.Span(1, 4); err != nil || !bytes.Equal(got, obj[off:off+n]) {
		t.Fatalf("ReadBatches(110): %v", err)
	}
}

func TestWriterRejects(t *testing.T) {
	kafka := Header{Encoding: EncodingKafka, StreamID: 1}
	b := func(base int64, n int) []byte { return batchSpec{base: base, count: n, ts: 1}.build(t) }
	forged := func(base int64, mut func([]byte)) []byte {
		raw := b(base, 3)
		mut(raw)
		resealBatch(raw)
		return raw
	}
	for _, c := range []struct {
		name  string
		h     Header
		adds  [][]byte // all but the last must succeed
		want  error
		newer bool // NewWriter itself fails
	}{
		{name: "kafka batch in an arrow segment", h: Header{Encoding: EncodingArrow}, adds: [][]byte{b(0, 1)}, want: ErrInvalid},
		{name: "unknown encoding", h: Header{Encoding: 9}, want: ErrInvalid, newer: true},
		{name: "negative partition", h: Header{Encoding: EncodingKafka, Partition: -1}, want: ErrInvalid, newer: true},
		{name: "base without end", h: Header{Encoding: EncodingKafka, BaseOffset: 5}, want: ErrInvalid, newer: true},
		{name: "empty range", h: Header{Encoding: EncodingKafka, BaseOffset: 5, EndOffset: 5}, want: ErrInvalid, newer: true},
		{name: "negative range", h: Header{Encoding: EncodingKafka, BaseOffset: -5, EndOffset: 5}, want: ErrInvalid, newer: true},
		{name: "overlap", h: kafka, adds: [][]byte{b(10, 3), b(12, 1)}, want: ErrInvalid},
		{name: "decreasing", h: kafka, adds: [][]byte{b(10, 3), b(5, 1)}, want: ErrInvalid},
		{name: "same base", h: kafka, adds: [][]byte{b(10, 1), b(10, 1)}, want: ErrInvalid},
		{name: "negative base", h: kafka, adds: [][]byte{b(-4, 1)}, want: ErrInvalid},
		{name: "overflow", h: kafka, adds: [][]byte{b(math.MaxInt64-1, 3)}, want: ErrInvalid},
		{name: "before range", h: Header{Encoding: EncodingKafka, BaseOffset: 10, EndOffset: 20}, adds: [][]byte{b(9, 1)}, want: ErrInvalid},
		{name: "past range", h: Header{Encoding: EncodingKafka, BaseOffset: 10, EndOffset: 20}, adds: [][]byte{b(18, 3)}, want: ErrInvalid},
		{name: "two batches in one", h: kafka, adds: [][]byte{append(b(0, 1), b(1, 1)...)}, want: ErrInvalid},
		{name: "trailing byte", h: kafka, adds: [][]byte{append(b(0, 1), 0)}, want: ErrInvalid},
		{name: "truncated", h: kafka, adds: [][]byte{b(0, 2)[:70]}, want: recordbatch.ErrTruncated},
		{name: "bad crc", h: kafka, adds: [][]byte{func() []byte { r := b(0, 2); r[70] ^= 1; return r }()}, want: recordbatch.ErrBadCRC},
		{name: "bad magic", h: kafka, adds: [][]byte{func() []byte { r := b(0, 2); r[16] = 1; return r }()}, want: recordbatch.ErrBadMagic},
		{name: "codec 7", h: kafka, adds: [][]byte{forged(0, func(r []byte) { r[22] |= 7 })}, want: ErrInvalid},
		{name: "negative lastOffsetDelta", h: kafka, adds: [][]byte{forged(0, func(r []byte) { binary.BigEndian.PutUint32(r[23:], 0xffffffff) })}, want: ErrInvalid},
		{name: "more records than offsets", h: kafka, adds: [][]byte{forged(0, func(r []byte) { binary.BigEndian.PutUint32(r[57:], 4) })}, want: ErrInvalid},
		{name: "negative numRecords", h: kafka, adds: [][]byte{forged(0, func(r []byte) { binary.BigEndian.PutUint32(r[57:], 0xffffffff) })}, want: ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewWriter(c.h)
			if c.newer {
				if !errors.Is(err, c.want) || w != nil {
					t.Fatalf("NewWriter: %v, want %v", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range c.adds {
				err := w.Add(a)
				if i < len(c.adds)-1 {
					if err != nil {
						t.Fatalf("Add %d: %v", i, err)
					}
					continue
				}
				if !errors.Is(err, c.want) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Add %d: %v, want %v and ErrInvalid", i, err, c.want)
				}
			}
		})
	}
}

// TestWriterState checks that a rejected Add leaves no trace, and Finish's rules.
func TestWriterState(t *testing.T) {
	h := Header{Encoding: EncodingKafka, StreamID: 3, Partition: 1, CreatedMs: 77}
	a, b2 := batchSpec{base: 10, count: 3, ts: 5}.build(t), batchSpec{base: 20, count: 2, ts: 6}.build(t)
	clean, _ := buildSegment(t, h, [][]byte{a, b2})

	w, err := NewWriter(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Finish(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Finish with no batches: %v", err)
	}
	w, _ = NewWriter(h)
	w.Reserve(Size(int64(len(a)+len(b2)), 2))
	before := cap(w.buf)
	if err := w.Add(a); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(batchSpec{base: 11, count: 1}.build(t)); err == nil {
		t.Fatal("overlapping Add accepted")
	}
	bad := slices.Clone(b2)
	bad[len(bad)-1] ^= 0xff
	if err := w.Add(bad); err == nil {
		t.Fatal("corrupt Add accepted")
	}
	if err := w.Add(b2); err != nil {
		t.Fatal(err)
	}
	if w.Len() != int64(HeaderSize+len(a)+len(b2)) {
		t.Fatalf("Len %d", w.Len())
	}
	if w.Batches() != 2 {
		t.Fatalf("Batches %d", w.Batches())
	}
	obj, _, err := w.Finish()
	if err != nil || !bytes.Equal(obj, clean) {
		t.Fatalf("object after rejected Adds differs from a clean one: %v", err)
	}
	if len(obj) != len(clean) || int64(len(obj)) != Size(int64(len(a)+len(b2)), 2) || cap(obj) != before {
		t.Fatalf("Size %d, object %d bytes, capacity %d after Reserve, %d at the end", Size(int64(len(a)+len(b2)), 2), len(obj), before, cap(obj))
	}

	// A writer on a reused buffer builds the same object in that buffer.
	buf := make([]byte, 5, 4096)
	w, err = NewWriterBuffer(h, buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{a, b2} {
		if err := w.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	obj2, _, err := w.Finish()
	if err != nil || !bytes.Equal(obj2, clean) || &obj2[0] != &buf[:1][0] {
		t.Fatalf("NewWriterBuffer: %v (same memory: %v)", err, &obj2[0] == &buf[:1][0])
	}
	if err := w.Add(b2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Add after Finish: %v", err)
	}
	if _, _, err := w.Finish(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second Finish: %v", err)
	}
}

// smallSegment is a three-batch segment used by the corruption tests.
func smallSegment(t testing.TB) []byte {
	specs := []batchSpec{
		{base: 5, count: 2, ts: 100, value: 3},
		{base: 9, deltas: []int32{1, 3}, ts: 50},
		{base: 13, empty: true, count: 2, ts: 70},
	}
	obj, _ := buildSegment(t, Header{Encoding: EncodingKafka, StreamID: 9, Partition: 2, CreatedMs: 1}, buildAll(t, specs))
	return obj
}

// TestCorruptionEveryByte changes every byte of a segment in turn and checks that Decode
// fails cleanly; that ReadInfo and ReadInfoAt fail when the byte is in the index or
// trailer; and that CheckBatches fails when it is in the data region.
func TestCorruptionEveryByte(t *testing.T) {
	obj := smallSegment(t)
	info, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	for i := range obj {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			c := slices.Clone(obj)
			c[i] ^= x
			d, err := Decode(c)
			if err == nil || d != nil {
				t.Fatalf("byte %d ^ %#x: Decode accepted", i, x)
			}
			mustDecodeFail(t, "Decode", err)
			rr := memReader{"k": c}
			ri, err := ReadInfo(t.Context(), rr, "k", int64(len(c)))
			ra, errAt := ReadInfoAt(t.Context(), rr, "k", info.IndexOffset())
			switch {
			case int64(i) >= info.IndexOffset():
				if err == nil || errAt == nil {
					t.Fatalf("byte %d ^ %#x in the index/trailer: ReadInfo %v, ReadInfoAt %v", i, x, err, errAt)
				}
				mustDecodeFail(t, "ReadInfo", err)
				mustDecodeFail(t, "ReadInfoAt", errAt)
			case int64(i) >= info.DataOffset:
				if err != nil || errAt != nil || !equalInfo(ri, info) || !equalInfo(ra, info) {
					t.Fatalf("byte %d ^ %#x in the data: ReadInfo %v, ReadInfoAt %v", i, x, err, errAt)
				}
				k := 0
				for k < len(info.Batches) && int64(i) >= info.Batches[k].Offset+int64(info.Batches[k].Length) {
					k++
				}
				off, n := info.Span(k, k+1)
				if err := info.CheckBatches(k, k+1, c[off:off+n]); err == nil {
					t.Fatalf("byte %d ^ %#x: CheckBatches of batch %d accepted", i, x, k)
				} else {
					mustDecodeFail(t, "CheckBatches", err)
				}
			}
		}
	}
}

// TestTruncationEveryLength cuts a segment at every length and appends junk to it.
func TestTruncationEveryLength(t *testing.T) {
	obj := smallSegment(t)
	info, _ := Decode(obj)
	for n := range len(obj) {
		c := slices.Clone(obj[:n])
		if _, err := Decode(c); err == nil {
			t.Fatalf("Decode accepted %d of %d bytes", n, len(obj))
		} else {
			mustDecodeFail(t, "Decode", err)
		}
		rr := memReader{"k": c}
		if _, err := ReadInfo(t.Context(), rr, "k", int64(n)); err == nil {
			t.Fatalf("ReadInfo accepted %d of %d bytes", n, len(obj))
		} else {
			mustDecodeFail(t, "ReadInfo", err)
		}
		// Reading past the end is the store's error; ReadInfoAt must still fail.
		if _, err := ReadInfoAt(t.Context(), rr, "k", info.IndexOffset()); err == nil {
			t.Fatalf("ReadInfoAt accepted %d of %d bytes", n, len(obj))
		}
		if n >= int(info.DataOffset) && n < int(info.IndexOffset()) {
			if err := info.CheckBatches(0, len(info.Batches), c[info.DataOffset:]); err == nil {
				t.Fatalf("CheckBatches accepted %d data bytes", n-int(info.DataOffset))
			}
		}
	}
	for _, tail := range [][]byte{{0}, []byte(magic), obj[len(obj)-TrailerSize:]} {
		c := append(slices.Clone(obj), tail...)
		if _, err := Decode(c); err == nil {
			t.Fatalf("Decode accepted %d extra bytes", len(tail))
		}
	}
	// A size that disagrees with the object is caught even when the store answers fully.
	if _, err := ReadInfo(t.Context(), memReader{"k": obj}, "k", int64(len(obj))+1); err == nil {
		t.Fatal("ReadInfo accepted a wrong size")
	}
	for _, at := range []int64{info.IndexOffset() - 1, info.IndexOffset() + 1, 0} {
		if _, err := ReadInfoAt(t.Context(), memReader{"k": obj}, "k", at); err == nil {
			t.Fatalf("ReadInfoAt accepted index offset %d (really %d)", at, info.IndexOffset())
		}
	}
	if _, err := ReadInfo(t.Context(), memReader{}, "missing", int64(len(obj))); !errors.Is(err, errNoObject) {
		t.Fatalf("ReadInfo of a missing object: %v", err)
	}
}

// TestSemanticChecks forges segments whose CRCs are all correct but whose fields disagree,
// and checks that the readers notice.
func TestSemanticChecks(t *testing.T) {
	base := smallSegment(t)
	info, err := Decode(base)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	idx := int(info.IndexOffset())
	entry := func(k int) int { return idx + HeaderSize + SectionHeaderSize + indexEntryCountField + k*IndexEntrySize }
	batch := func(k int) int { return int(info.Batches[k].Offset) }
	both := func(off int, put func(b []byte)) func([]byte) { // a header field, in both copies
		return func(o []byte) { put(o[off:]); put(o[idx+off:]) }
	}
	for _, c := range []struct {
		name     string
		mut      func([]byte)
		infoToo  bool // ReadInfo must fail too (the index alone shows it)
		wantKind error
	}{
		{"record count", both(56, func(b []byte) { be.PutUint64(b, 3) }), false, ErrCorrupt},
		{"min timestamp", both(64, func(b []byte) { be.PutUint64(b, 49) }), false, ErrCorrupt},
		{"max timestamp", both(72, func(b []byte) { be.PutUint64(b, 1<<40) }), true, ErrCorrupt},
		{"offset count", both(48, func(b []byte) { be.PutUint64(b, 9) }), true, ErrCorrupt},
		{"batch count", both(28, func(b []byte) { be.PutUint32(b, 2) }), true, ErrCorrupt},
		{"base offset after first batch", both(32, func(b []byte) { be.PutUint64(b, 6) }), true, ErrCorrupt},
		{"end offset before last batch end", both(40, func(b []byte) { be.PutUint64(b, 14) }), true, ErrCorrupt},
		{"empty range", both(40, func(b []byte) { be.PutUint64(b, 5) }), true, ErrCorrupt},
		{"negative partition", both(24, func(b []byte) { be.PutUint32(b, 0x80000000) }), true, ErrCorrupt},
		{"header flags", both(13, func(b []byte) { b[0] = 1 }), true, ErrCorrupt},
		{"header reserved", both(14, func(b []byte) { b[1] = 1 }), true, ErrCorrupt},
		{"header length", both(10, func(b []byte) { be.PutUint16(b, 93) }), true, ErrCorrupt},
		{"unknown encoding", both(12, func(b []byte) { b[0] = 3 }), true, ErrCorrupt},
		// A kafka segment relabelled arrow: its batches are not groups and it has no
		// column ranges.
		{"arrow encoding", both(12, func(b []byte) { b[0] = byte(EncodingArrow) }), true, ErrCorrupt},
		{"header version 2", both(8, func(b []byte) { be.PutUint16(b, 2) }), true, ErrUnsupportedVersion},
		{"header copy differs", func(o []byte) { be.PutUint64(o[idx+80:], 2) }, false, ErrCorrupt},
		{"header differs from copy", func(o []byte) { be.PutUint64(o[80:], 2) }, false, ErrCorrupt},
		{"batch max timestamp", func(o []byte) { be.PutUint64(o[batch(1)+35:], 52) }, false, ErrCorrupt},
		{"batch base offset", func(o []byte) { be.PutUint64(o[batch(1)+0:], 10) }, false, ErrCorrupt},
		{"batch lastOffsetDelta", func(o []byte) { be.PutUint32(o[batch(2)+23:], 0) }, false, ErrCorrupt},
		{"batch codec", func(o []byte) { o[batch(2)+22] = 6 }, false, ErrCorrupt},
		{"batch magic", func(o []byte) { o[batch(0)+16] = 1 }, false, recordbatch.ErrBadMagic},
		{"batch length short", func(o []byte) { be.PutUint32(o[batch(0)+8:], be.Uint32(o[batch(0)+8:])-1) }, false, ErrCorrupt},
		{"entry base offset overlaps", func(o []byte) { be.PutUint64(o[entry(1):], 6) }, true, ErrCorrupt},
		{"entry count zero", func(o []byte) { be.PutUint32(o[entry(0)+8:], 0) }, true, ErrCorrupt},
		{"entry count huge", func(o []byte) { be.PutUint32(o[entry(0)+8:], 0xffffffff) }, true, ErrCorrupt},
		{"entry byte offset", func(o []byte) { be.PutUint64(o[entry(1)+20:], 1) }, true, ErrCorrupt},
		{"entry length", func(o []byte) { be.PutUint32(o[entry(0)+28:], 60) }, true, ErrCorrupt},
		{"index count", func(o []byte) { be.PutUint32(o[entry(0)-4:], 2) }, true, ErrCorrupt},
		{"section type", func(o []byte) { be.PutUint16(o[idx+HeaderSize:], 5) }, true, ErrCorrupt},
		{"section flags", func(o []byte) { be.PutUint16(o[idx+HeaderSize+2:], 1) }, true, ErrCorrupt},
		{"section length", func(o []byte) { be.PutUint32(o[idx+HeaderSize+4:], 4+36*2) }, true, ErrCorrupt},
		{"trailer data offset", func(o []byte) { be.PutUint64(o[len(o)-TrailerSize:], 91) }, true, ErrCorrupt},
		{"trailer data length", func(o []byte) { be.PutUint64(o[len(o)-TrailerSize+8:], 1<<63) }, true, ErrCorrupt},
		{"trailer index offset", func(o []byte) { be.PutUint64(o[len(o)-TrailerSize+16:], math.MaxUint64) }, true, ErrCorrupt},
		{"trailer index length", func(o []byte) { be.PutUint32(o[len(o)-TrailerSize+24:], 10) }, true, ErrCorrupt},
		{"trailer version", func(o []byte) { be.PutUint16(o[len(o)-10:], 2) }, true, ErrUnsupportedVersion},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := slices.Clone(base)
			c.mut(o)
			if !strings.HasPrefix(c.name, "trailer") && !strings.HasPrefix(c.name, "section length") && !strings.HasPrefix(c.name, "index count") {
				reseal(o)
			} else {
				// reseal trusts these fields; recompute only the trailer CRC.
				be.PutUint32(o[len(o)-TrailerSize+offTrailerCRC:], crc32c(o[idx:len(o)-TrailerSize+offTrailerCRC]))
			}
			_, err := Decode(o)
			if !errors.Is(err, c.wantKind) {
				t.Fatalf("Decode: %v, want %v", err, c.wantKind)
			}
			_, err = ReadInfo(t.Context(), memReader{"k": o}, "k", int64(len(o)))
			if c.infoToo != (err != nil) {
				t.Fatalf("ReadInfo: %v, want failure %v", err, c.infoToo)
			}
			if err != nil {
				mustDecodeFail(t, "ReadInfo", err)
			}
		})
	}
}

// TestSections checks the index's section rules: an unknown optional section is skipped
// (and kept for re-encoding), an unknown required one needs a newer reader, and the batch
// index comes first, once.
func TestSections(t *testing.T) {
	h := Header{Encoding: EncodingKafka, StreamID: 1}
	batches := [][]byte{batchSpec{base: 0, count: 2, ts: 1}.build(t)}
	finish := func(extra ...section) []byte {
		w, _ := NewWriter(h)
		for _, b := range batches {
			if err := w.Add(b); err != nil {
				t.Fatal(err)
			}
		}
		obj, _, err := w.finish(extra)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	opt := []section{{typ: 0x7001, flags: SectionOptional, body: []byte("later")}, {typ: SectionColumnRanges, flags: SectionOptional | 0x8000}}
	obj := finish(opt...)
	d, err := Decode(obj)
	if err != nil {
		t.Fatalf("Decode with optional sections: %v", err)
	}
	if len(d.extra) != 2 || string(d.extra[0].body) != "later" || d.extra[1].typ != SectionColumnRanges {
		t.Fatalf("extra sections %+v", d.extra)
	}
	ri, err := ReadInfo(t.Context(), memReader{"k": obj}, "k", int64(len(obj)))
	if err != nil || !equalInfo(ri, d) {
		t.Fatalf("ReadInfo: %v", err)
	}
	for _, c := range []struct {
		name  string
		extra []section
		want  error
	}{
		{"required column ranges", []section{{typ: SectionColumnRanges, body: []byte{1}}}, ErrUnsupportedVersion},
		{"required unknown", []section{{typ: 0x7001}}, ErrUnsupportedVersion},
		{"second batch index", []section{{typ: SectionBatchIndex, body: []byte{0, 0, 0, 0}}}, ErrCorrupt},
		{"type 0", []section{{typ: 0, flags: SectionOptional}}, ErrCorrupt},
	} {
		o := finish(c.extra...)
		if _, err := Decode(o); !errors.Is(err, c.want) {
			t.Errorf("%s: Decode %v, want %v", c.name, err, c.want)
		}
		if _, err := ReadInfo(t.Context(), memReader{"k": o}, "k", int64(len(o))); !errors.Is(err, c.want) {
			t.Errorf("%s: ReadInfo %v, want %v", c.name, err, c.want)
		}
	}
	// A section cut short by the index length.
	o := finish(section{typ: 0x7001, flags: SectionOptional, body: []byte("abc")})
	be := binary.BigEndian
	idx := len(o) - TrailerSize - (SectionHeaderSize + 3)
	be.PutUint32(o[idx+4:], 4)
	be.PutUint32(o[len(o)-TrailerSize+offTrailerCRC:], crc32c(o[HeaderSize+len(batches[0]):len(o)-TrailerSize+offTrailerCRC]))
	if _, err := Decode(o); !errors.Is(err, ErrTruncated) {
		t.Errorf("section past the index end: %v", err)
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func TestReadInfoLargeIndex(t *testing.T) {
	// 8000 small batches: the index (about 288 KB) exceeds SuffixRead.
	var batches [][]byte
	for i := range 8000 {
		batches = append(batches, emptyBatch(int64(i)*2, 0, int64(i), int64(i)))
	}
	obj, info := buildSegment(t, Header{Encoding: EncodingKafka, StreamID: 5}, batches)
	if info.Size-info.IndexOffset() <= SuffixRead {
		t.Fatalf("index of %d bytes fits the suffix read", info.Size-info.IndexOffset())
	}
	rr := &countingReader{RangeReader: memReader{"k": obj}}
	ri, err := ReadInfo(t.Context(), rr, "k", int64(len(obj)))
	if err != nil || !equalInfo(ri, &info) || rr.reads.Load() != 2 {
		t.Fatalf("ReadInfo: %v after %d reads", err, rr.reads.Load())
	}
	rr.reads.Store(0)
	rr.bytes.Store(0)
	ra, err := ReadInfoAt(t.Context(), rr, "k", info.IndexOffset())
	if err != nil || !equalInfo(ra, &info) || rr.reads.Load() != 1 || rr.bytes.Load() != info.Size-info.IndexOffset() {
		t.Fatalf("ReadInfoAt: %v after %d reads of %d bytes", err, rr.reads.Load(), rr.bytes.Load())
	}
	if i, ok := ri.Find(7001); i != 3501 || ok {
		t.Fatalf("Find(7001) = %d, %v", i, ok)
	}
	if i, ok := ri.Find(7002); i != 3501 || !ok {
		t.Fatalf("Find(7002) = %d, %v", i, ok)
	}
}

func TestCheckBatchesArgs(t *testing.T) {
	obj := smallSegment(t)
	info, _ := Decode(obj)
	for _, r := range [][2]int{{-1, 1}, {2, 1}, {0, 4}} {
		if err := info.CheckBatches(r[0], r[1], nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckBatches(%d, %d): %v", r[0], r[1], err)
		}
	}
	if err := info.CheckBatches(1, 1, nil); err != nil {
		t.Errorf("CheckBatches of no batches: %v", err)
	}
	off, n := info.Span(0, 2)
	if err := info.CheckBatches(0, 2, obj[off:off+n+1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("CheckBatches with an extra byte: %v", err)
	}
	if err := info.CheckBatches(1, 3, obj[off:off+n]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("CheckBatches of the wrong batches: %v", err)
	}
	if off, n := info.Span(3, 3); off != info.IndexOffset() || n != 0 {
		t.Errorf("Span(3, 3) = %d, %d", off, n)
	}
}

func TestObjectKey(t *testing.T) {
	k := ObjectKey(42, 7, 1234, "01JDQ7XW5GABCDEFGHJKMNPQRS")
	if k != "seg/42/7/00000000000000001234-01JDQ7XW5GABCDEFGHJKMNPQRS.seg" {
		t.Fatalf("ObjectKey = %q", k)
	}
	if !strings.HasPrefix(k, ObjectPrefix(42, 7)) || strings.HasPrefix(k, ObjectPrefix(4, 27)) {
		t.Fatal("ObjectPrefix does not delimit the partition")
	}
	for _, c := range []struct {
		s  uint64
		p  int32
		b  int64
		id string
	}{{0, 0, 0, "a"}, {math.MaxUint64, math.MaxInt32, math.MaxInt64, "x-y.seg-z"}, {1, 2, 3, strings.Repeat("é", 64)}} {
		key := ObjectKey(c.s, c.p, c.b, c.id)
		s, p, b, id, err := ParseObjectKey(key)
		if err != nil || s != c.s || p != c.p || b != c.b || id != c.id {
			t.Errorf("ParseObjectKey(%q) = %d %d %d %q %v", key, s, p, b, id, err)
		}
		if err := ValidateID(c.id); err != nil {
			t.Errorf("ValidateID(%q): %v", c.id, err)
		}
	}
	// Keys of one partition sort by base offset.
	if !(ObjectKey(1, 0, 99, "z") < ObjectKey(1, 0, 100, "a")) {
		t.Error("keys do not sort by base offset")
	}
	for _, bad := range []string{
		"", "seg/1/2/00000000000000000003-a", "wal/1/2/00000000000000000003-a.seg", "seg/1/2/3-a.seg",
		"seg/01/2/00000000000000000003-a.seg", "seg/1/02/00000000000000000003-a.seg", "seg/1/-2/00000000000000000003-a.seg",
		"seg/+1/2/00000000000000000003-a.seg", "seg/1/2/0000000000000000000x-a.seg", "seg/1/2/00000000000000000003-.seg",
		"seg/1/2/00000000000000000003_a.seg", "seg/1/2/99999999999999999999-a.seg", "seg/1/2/00000000000000000003-a/b.seg",
		"seg/1/2147483648/00000000000000000003-a.seg", "seg/18446744073709551616/2/00000000000000000003-a.seg",
		"seg/1/2/00000000000000000003-a\x00.seg", "seg/1/2/00000000000000000003-" + strings.Repeat("a", MaxIDLen+1) + ".seg",
		"seg/1/2/00000000000000000003-\xff.seg", "seg//2/00000000000000000003-a.seg",
	} {
		if _, _, _, _, err := ParseObjectKey(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseObjectKey(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a\nb", strings.Repeat("a", MaxIDLen+1), "\xff"} {
		if err := ValidateID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateID(%q): %v", bad, err)
		}
	}
}

func TestEncodingString(t *testing.T) {
	for e, want := range map[Encoding]string{EncodingKafka: "kafka", EncodingArrow: "arrow", 0: "encoding(0)", 7: "encoding(7)"} {
		if e.String() != want {
			t.Errorf("%d: %q, want %q", e, e.String(), want)
		}
	}
}

func TestReadBatchesErrors(t *testing.T) {
	obj := smallSegment(t)
	info, _ := Decode(obj)
	if _, err := ReadBatches(t.Context(), memReader{}, "k", info, 5, 1<<20); !errors.Is(err, errNoObject) {
		t.Errorf("missing object: %v", err)
	}
	c := slices.Clone(obj)
	c[info.Batches[1].Offset+40] ^= 1
	if _, err := ReadBatches(t.Context(), memReader{"k": c}, "k", info, 5, 1<<20); !errors.Is(err, ErrBadCRC) {
		t.Errorf("corrupt batch: %v", err)
	}
	// A fetch that stops before the corrupt batch still succeeds.
	if got, err := ReadBatches(t.Context(), memReader{"k": c}, "k", info, 5, 1); err != nil || len(got) != int(info.Batches[0].Length) {
		t.Errorf("fetch of the intact first batch: %d bytes, %v", len(got), err)
	}
	// A short answer from the store is truncation.
	if _, err := ReadBatches(t.Context(), memReader{"k": obj[:info.Batches[2].Offset+3]}, "k", info, 13, 1<<20); !errors.Is(err, ErrTruncated) {
		t.Errorf("short read: %v", err)
	}
}

// TestCRCConcat checks the CRC algebra the batch CRCs rely on against the library.
func TestCRCConcat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 21, 22, 61, 100, 4096, 70000} {
		b := pattern(rng.Uint32(), n)
		whole := crc32.Checksum(b, castagnoli)
		for range 5 {
			cut := 0
			if n > 0 {
				cut = rng.IntN(n + 1)
			}
			got := crcConcat(crc32.Checksum(b[:cut], castagnoli), crc32.Checksum(b[cut:], castagnoli), int64(n-cut))
			if got != whole {
				t.Fatalf("n=%d cut=%d: %#08x, want %#08x", n, cut, got, whole)
			}
		}
	}
	raw := batchSpec{base: 9, count: 4, ts: 3, value: 100}.build(t)
	bt, _, err := recordbatch.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if batchCRC(bt) != crc32.Checksum(raw, castagnoli) {
		t.Fatal("batchCRC differs from the CRC of the batch's bytes")
	}
}

package walfmt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oklog/ulid/v2"
)

// memReader is a RangeReader over in-memory objects with objstore.Bucket's GetRange
// semantics: n < 0 reads to the end, a range past the end is cut, off beyond the size fails.
type memReader map[string][]byte

var errNoObject = errors.New("memReader: no such object")

func (m memReader) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	b, ok := m[key]
	if !ok {
		return nil, errNoObject
	}
	if off < 0 || off > int64(len(b)) {
		return nil, fmt.Errorf("memReader: offset %d of %d-byte object", off, len(b))
	}
	end := int64(len(b))
	if n >= 0 && off+n < end {
		end = off + n
	}
	return slices.Clone(b[off:end]), nil
}

// countingReader counts range reads.
type countingReader struct {
	RangeReader
	reads atomic.Int64
}

func (c *countingReader) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.reads.Add(1)
	return c.RangeReader.GetRange(ctx, key, off, n)
}

var testULID = ulid.MustParse("01JDQ7XW5GABCDEFGHJKMNPQRS")

func randomChunks(rng *rand.Rand, n, maxPayload int) []Chunk {
	seen := map[key]bool{}
	var chunks []Chunk
	for len(chunks) < n {
		k := key{uint64(rng.IntN(20)), int32(rng.IntN(8))}
		if rng.IntN(10) == 0 {
			k.stream = rng.Uint64()
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		enc := EncodingKafka
		if rng.IntN(4) == 0 {
			enc = EncodingArrow
		}
		chunks = append(chunks, Chunk{
			StreamID: k.stream, Partition: k.partition, Encoding: enc,
			Records: 1 + rng.Int64N(1000), MaxTimestamp: rng.Int64() - 1<<62,
			Payload: pattern(rng.Uint32(), 1+rng.IntN(maxPayload)),
		})
	}
	return chunks
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 50 {
		n := 1 + rng.IntN(40)
		h := Header{NodeID: fmt.Sprintf("node-%d", iter), ULID: testULID, Class: Class(1 + iter%3)}
		chunks := randomChunks(rng, n, 300)
		orig := slices.Clone(chunks)
		prefix := []byte("unrelated prefix")
		buf, refs, err := AppendObject(slices.Clone(prefix), h, chunks)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(buf, prefix) {
			t.Fatal("AppendObject changed dst's existing bytes")
		}
		obj := buf[len(prefix):]
		o, err := Decode(obj)
		if err != nil {
			t.Fatalf("iter %d: Decode: %v", iter, err)
		}
		if o.Header != h || !slices.Equal(o.Chunks, refs) || len(refs) != n {
			t.Fatalf("iter %d: decoded %+v, want header %+v refs %+v", iter, o, h, refs)
		}
		rr := &countingReader{RangeReader: memReader{"obj": obj}}
		o2, err := ReadIndex(t.Context(), rr, "obj", int64(len(obj)))
		if err != nil {
			t.Fatalf("iter %d: ReadIndex: %v", iter, err)
		}
		if o2.Header != h || !slices.Equal(o2.Chunks, refs) {
			t.Fatalf("iter %d: ReadIndex %+v", iter, o2)
		}
		if rr.reads.Load() != 1 {
			t.Errorf("iter %d: ReadIndex made %d reads, want 1", iter, rr.reads.Load())
		}
		for _, c := range orig {
			ref, ok := o.Lookup(c.StreamID, c.Partition)
			if !ok {
				t.Fatalf("Lookup(%d, %d) found nothing", c.StreamID, c.Partition)
			}
			if ref.Encoding != c.Encoding || ref.Records != c.Records || ref.MaxTimestamp != c.MaxTimestamp {
				t.Fatalf("Lookup ref %+v for chunk %+v", ref, c)
			}
			payload, err := ReadChunk(t.Context(), rr, "obj", ref)
			if err != nil {
				t.Fatalf("ReadChunk: %v", err)
			}
			if !bytes.Equal(payload, c.Payload) {
				t.Fatalf("ReadChunk payload differs for %d/%d", c.StreamID, c.Partition)
			}
			got, p2, err := DecodeChunk(obj[ref.Offset : ref.Offset+ref.Length])
			if err != nil || !bytes.Equal(p2, c.Payload) {
				t.Fatalf("DecodeChunk: %v", err)
			}
			if want := (ChunkRef{c.StreamID, c.Partition, c.Encoding, c.Records, c.MaxTimestamp, 0, ref.Length, c.Encrypted, c.EnvelopeLen}); got != want {
				t.Fatalf("DecodeChunk ref %+v, want %+v", got, want)
			}
		}
		if _, ok := o.Lookup(1<<63, 0); ok {
			t.Fatal("Lookup found a chunk that is not there")
		}
		for i := 1; i < len(refs); i++ {
			if compareKey(key{refs[i-1].StreamID, refs[i-1].Partition}, key{refs[i].StreamID, refs[i].Partition}) >= 0 {
				t.Fatalf("refs not sorted at %d", i)
			}
		}
	}
}

func TestAppendObjectRejects(t *testing.T) {
	ok := Chunk{StreamID: 1, Encoding: EncodingKafka, Records: 1, Payload: []byte{1}}
	h := Header{NodeID: "n", ULID: testULID, Class: ClassStandard}
	with := func(f func(*Chunk)) []Chunk { c := ok; f(&c); return []Chunk{c} }
	cases := []struct {
		name   string
		h      Header
		chunks []Chunk
	}{
		{"no chunks", h, nil},
		{"class 0", Header{NodeID: "n", ULID: testULID}, []Chunk{ok}},
		{"class 4", Header{NodeID: "n", ULID: testULID, Class: 4}, []Chunk{ok}},
		{"zero ulid", Header{NodeID: "n", Class: ClassQuorum}, []Chunk{ok}},
		{"empty node", Header{ULID: testULID, Class: ClassQuorum}, []Chunk{ok}},
		{"long node", Header{NodeID: strings.Repeat("x", 256), ULID: testULID, Class: ClassQuorum}, []Chunk{ok}},
		{"slash in node", Header{NodeID: "a/b", ULID: testULID, Class: ClassQuorum}, []Chunk{ok}},
		{"dotdot node", Header{NodeID: "..", ULID: testULID, Class: ClassQuorum}, []Chunk{ok}},
		{"control in node", Header{NodeID: "a\nb", ULID: testULID, Class: ClassQuorum}, []Chunk{ok}},
		{"bad utf8 node", Header{NodeID: "a\xff", ULID: testULID, Class: ClassQuorum}, []Chunk{ok}},
		{"empty payload", h, with(func(c *Chunk) { c.Payload = nil })},
		{"zero records", h, with(func(c *Chunk) { c.Records = 0 })},
		{"negative partition", h, with(func(c *Chunk) { c.Partition = -1 })},
		{"encoding 0", h, with(func(c *Chunk) { c.Encoding = 0 })},
		{"encoding 3", h, with(func(c *Chunk) { c.Encoding = 3 })},
		{"duplicate", h, []Chunk{ok, {StreamID: 2, Encoding: EncodingArrow, Records: 1, Payload: []byte{2}}, ok}},
	}
	for _, c := range cases {
		dst := []byte("keep")
		out, refs, err := AppendObject(dst, c.h, c.chunks)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", c.name, err)
		}
		if string(out) != "keep" || refs != nil {
			t.Errorf("%s: dst %q refs %v after failure", c.name, out, refs)
		}
	}
}

// mustDecodeFail checks that a decode error is a clean, classified failure.
func mustDecodeFail(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: decoded without error", what)
	}
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("%s: error %v is neither ErrCorrupt nor ErrUnsupportedVersion", what, err)
	}
}

// TestCorruptionEveryByte truncates each golden object at every length and corrupts every
// byte (one flipped bit, and all bits), and checks that Decode fails cleanly every time, as
// do ReadIndex for bytes of the index and footer and ReadChunk and DecodeChunk for bytes
// of a chunk.
func TestCorruptionEveryByte(t *testing.T) {
	for _, g := range goldenCases() {
		t.Run(g.file, func(t *testing.T) {
			obj := readGolden(t, g.file)
			o, err := Decode(obj)
			if err != nil {
				t.Fatal(err)
			}
			indexOff := int64(binary.BigEndian.Uint64(obj[len(obj)-FooterSize:]))
			for n := range len(obj) {
				_, err := Decode(obj[:n])
				mustDecodeFail(t, fmt.Sprintf("Decode of first %d bytes", n), err)
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("truncation to %d: %v is not ErrCorrupt", n, err)
				}
				_, err = ReadIndex(t.Context(), memReader{"k": obj[:n]}, "k", int64(n))
				mustDecodeFail(t, fmt.Sprintf("ReadIndex of first %d bytes", n), err)
			}
			mustDecodeFail(t, "Decode with a trailing byte", func() error { _, err := Decode(append(slices.Clone(obj), 0)); return err }())

			for _, ref := range o.Chunks {
				chunk := obj[ref.Offset : ref.Offset+ref.Length]
				for n := range len(chunk) {
					_, _, err := DecodeChunk(chunk[:n])
					mustDecodeFail(t, fmt.Sprintf("DecodeChunk of first %d bytes of chunk at %d", n, ref.Offset), err)
				}
				_, _, err := DecodeChunk(append(slices.Clone(chunk), 0))
				mustDecodeFail(t, "DecodeChunk with a trailing byte", err)
			}

			chunkAt := func(pos int64) (ChunkRef, bool) {
				for _, r := range o.Chunks {
					if pos >= r.Offset && pos < r.Offset+r.Length {
						return r, true
					}
				}
				return ChunkRef{}, false
			}
			bad := slices.Clone(obj)
			for i := range bad {
				for _, mask := range []byte{0x01, 0x80, 0xff} {
					bad[i] ^= mask
					what := fmt.Sprintf("byte %d ^ %#x", i, mask)
					_, err := Decode(bad)
					mustDecodeFail(t, "Decode with "+what, err)
					rr := memReader{"k": bad}
					if int64(i) >= indexOff {
						_, err := ReadIndex(t.Context(), rr, "k", int64(len(bad)))
						mustDecodeFail(t, "ReadIndex with "+what, err)
					}
					if ref, ok := chunkAt(int64(i)); ok {
						_, err := ReadChunk(t.Context(), rr, "k", ref)
						mustDecodeFail(t, "ReadChunk with "+what, err)
						_, _, err = DecodeChunk(bad[ref.Offset : ref.Offset+ref.Length])
						mustDecodeFail(t, "DecodeChunk with "+what, err)
					}
					bad[i] ^= mask
				}
			}
		})
	}
}

// resealHeader recomputes the object header's CRC after a test edited it.
func resealHeader(obj []byte) {
	hlen := int(binary.BigEndian.Uint16(obj[10:12]))
	binary.BigEndian.PutUint32(obj[hlen-4:], crc32.Checksum(obj[:hlen-4], castagnoli))
}

// TestNewerVersions checks that this reader rejects version-3 objects and chunks with
// ErrUnsupportedVersion (not as corruption), naming the version.
func TestNewerVersions(t *testing.T) {
	obj := readGolden(t, "multi.wal")
	o, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}

	v3 := slices.Clone(obj)
	binary.BigEndian.PutUint16(v3[8:], 3)
	resealHeader(v3)
	_, err = Decode(v3)
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("Decode of a v3 header: %v", err)
	}

	v3 = slices.Clone(obj)
	binary.BigEndian.PutUint16(v3[len(v3)-10:], 3)
	_, err = ReadIndex(t.Context(), memReader{"k": v3}, "k", int64(len(v3)))
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadIndex of a v3 footer: %v", err)
	}

	// A v3 chunk, whose layout this reader does not know.
	ref := o.Chunks[0]
	chunk := slices.Clone(obj[ref.Offset : ref.Offset+ref.Length])
	chunk[2], chunk[3] = 3, 1
	binary.BigEndian.PutUint16(chunk[4:], ChunkHeaderSize+60)
	_, _, err = DecodeChunk(chunk)
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("DecodeChunk of a v3 chunk: %v", err)
	}

	// A v1 chunk with the encrypted flag is corrupt, even with a valid header CRC.
	chunk = slices.Clone(obj[ref.Offset : ref.Offset+ref.Length])
	chunk[3] = 1
	binary.BigEndian.PutUint32(chunk[44:], crc32.Checksum(chunk[:44], castagnoli))
	_, _, err = DecodeChunk(chunk)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "flags") {
		t.Errorf("DecodeChunk of a v1 chunk with flags: %v", err)
	}
}

// TestDecodeRejectsWellSealed builds objects whose CRCs are all valid but whose content
// breaks a rule, which only the field checks can catch.
func TestDecodeRejectsWellSealed(t *testing.T) {
	h := Header{NodeID: "n1", ULID: testULID, Class: ClassStandard}
	good := Chunk{StreamID: 1, Encoding: EncodingKafka, Records: 1, Payload: []byte{1, 2, 3}}
	// build assembles an object from raw chunks without AppendObject's checks.
	build := func(hdr Header, chunks []Chunk, edit func(refs []ChunkRef)) []byte {
		obj := appendHeader(nil, hdr, Version1)
		refs := make([]ChunkRef, len(chunks))
		for i := range chunks {
			off := len(obj)
			obj = appendChunk(obj, &chunks[i])
			c := chunks[i]
			refs[i] = ChunkRef{c.StreamID, c.Partition, c.Encoding, c.Records, c.MaxTimestamp, int64(off), int64(len(obj) - off), false, 0}
		}
		if edit != nil {
			edit(refs)
		}
		indexOff := len(obj)
		obj = appendIndex(obj, hdr, refs)
		return appendFooter(obj, uint64(indexOff), uint32(len(obj)-indexOff), obj[indexOff:], Version1)
	}
	if _, err := Decode(build(h, []Chunk{good}, nil)); err != nil {
		t.Fatalf("control object: %v", err)
	}
	second := good
	second.StreamID = 2
	cases := []struct {
		name string
		obj  []byte
		want string
	}{
		{"empty payload", build(h, []Chunk{{StreamID: 1, Encoding: EncodingKafka, Records: 1}}, nil), "chunk length 48"},
		{"zero records", build(h, []Chunk{{StreamID: 1, Encoding: EncodingKafka, Payload: []byte{1}}}, nil), "0 records"},
		{"unknown encoding", build(h, []Chunk{{StreamID: 1, Encoding: 7, Records: 1, Payload: []byte{1}}}, nil), "encoding(7)"},
		{"negative partition", build(h, []Chunk{{StreamID: 1, Partition: -2, Encoding: EncodingKafka, Records: 1, Payload: []byte{1}}}, nil), "negative partition"},
		{"unsorted", build(h, []Chunk{second, good}, nil), "out of order"},
		{"duplicate", build(h, []Chunk{good, good}, nil), "out of order"},
		{"no chunks", build(h, nil, nil), "index length"},
		{"zero ulid", build(Header{NodeID: "n1", Class: ClassStandard}, []Chunk{good}, nil), "ulid"},
		{"bad class", build(Header{NodeID: "n1", ULID: testULID, Class: 9}, []Chunk{good}, nil), "class(9)"},
		{"slash in node", build(Header{NodeID: "a/b", ULID: testULID, Class: ClassStandard}, []Chunk{good}, nil), "node id"},
		{"index records differ", build(h, []Chunk{good}, func(r []ChunkRef) { r[0].Records = 5 }), "differs from index"},
		{"index timestamp differs", build(h, []Chunk{good}, func(r []ChunkRef) { r[0].MaxTimestamp = 5 }), "differs from index"},
		{"index encoding differs", build(h, []Chunk{good}, func(r []ChunkRef) { r[0].Encoding = EncodingArrow }), "differs from index"},
		{"index stream differs", build(h, []Chunk{good}, func(r []ChunkRef) { r[0].StreamID = 3 }), "differs from index"},
		{"index offset gap", build(h, []Chunk{good}, func(r []ChunkRef) { r[0].Offset++ }), "chunk offset"},
		{"index length short", build(h, []Chunk{good, second}, func(r []ChunkRef) { r[0].Length-- }), "chunk offset"},
	}
	for _, c := range cases {
		_, err := Decode(c.obj)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt mentioning %q", c.name, err, c.want)
		}
	}

	// A lone empty chunk is rejected by DecodeChunk too.
	empty := appendChunk(nil, &Chunk{StreamID: 1, Encoding: EncodingKafka, Records: 1})
	if _, _, err := DecodeChunk(empty); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "payload length 0") {
		t.Errorf("empty chunk: %v", err)
	}

	// Header and index identities must agree.
	obj := build(h, []Chunk{good}, nil)
	obj[len("LOAMWAL\x00")+4] = byte(ClassExpress)
	resealHeader(obj)
	if _, err := Decode(obj); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "differs from header") {
		t.Errorf("header/index class mismatch: %v", err)
	}
}

func TestErrorKinds(t *testing.T) {
	obj := readGolden(t, "one-chunk.wal")
	cases := []struct {
		name string
		edit func([]byte) []byte
		kind error
	}{
		{"header magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrBadMagic},
		{"footer magic", func(b []byte) []byte { b[len(b)-1] = 'X'; return b }, ErrBadMagic},
		{"header crc", func(b []byte) []byte { b[13] ^= 1; return b }, ErrBadCRC},
		{"payload", func(b []byte) []byte { b[40+48] ^= 1; return b }, ErrBadCRC},
		{"index", func(b []byte) []byte { b[len(b)-FooterSize-1] ^= 1; return b }, ErrBadCRC},
		{"short", func(b []byte) []byte { return b[:20] }, ErrTruncated},
	}
	for _, c := range cases {
		_, err := Decode(c.edit(slices.Clone(obj)))
		if !errors.Is(err, c.kind) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want %v and ErrCorrupt", c.name, err, c.kind)
		}
	}
}

func TestReadIndexLargeIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	chunks := randomChunks(rng, 2000, 1)
	for i := range chunks { // randomChunks draws from a small key space: make keys unique
		chunks[i].StreamID, chunks[i].Partition = uint64(i/10), int32(i%10)
	}
	obj, refs, err := AppendObject(nil, Header{NodeID: "big", ULID: testULID, Class: ClassStandard}, chunks)
	if err != nil {
		t.Fatal(err)
	}
	rr := &countingReader{RangeReader: memReader{"k": obj}}
	o, err := ReadIndex(t.Context(), rr, "k", int64(len(obj)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Chunks, refs) {
		t.Fatal("ReadIndex refs differ")
	}
	if indexLen := 22 + 3 + 2000*IndexEntrySize; indexLen <= SuffixRead || rr.reads.Load() != 2 {
		t.Fatalf("index of %d bytes read with %d reads, want 2", indexLen, rr.reads.Load())
	}
}

func TestReadErrors(t *testing.T) {
	g := goldenCases()[1]
	obj := readGolden(t, g.file)
	o, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	rr := memReader{"k": obj}
	ctx := t.Context()
	if _, err := ReadIndex(ctx, rr, "missing", int64(len(obj))); !errors.Is(err, errNoObject) {
		t.Errorf("missing object: %v", err)
	}
	if _, err := ReadIndex(ctx, rr, "k", int64(len(obj))+5); !errors.Is(err, ErrTruncated) {
		t.Errorf("size larger than the object: %v", err)
	}
	if _, err := ReadIndex(ctx, rr, "k", int64(len(obj))-5); !errors.Is(err, ErrCorrupt) {
		t.Errorf("size smaller than the object: %v", err)
	}
	if _, err := ReadIndex(ctx, rr, "k", 3); !errors.Is(err, ErrTruncated) {
		t.Errorf("tiny size: %v", err)
	}
	ref := o.Chunks[2]
	payload, err := ReadChunk(ctx, rr, "k", ChunkRef{StreamID: ref.StreamID, Partition: ref.Partition, Offset: ref.Offset, Length: ref.Length})
	if err != nil {
		t.Fatalf("ReadChunk with a ref lacking encoding and records: %v", err)
	}
	if len(payload) != int(ref.Length)-ChunkHeaderSize {
		t.Errorf("payload of %d bytes", len(payload))
	}
	for name, r := range map[string]ChunkRef{
		"wrong stream":    {StreamID: ref.StreamID + 1, Partition: ref.Partition, Offset: ref.Offset, Length: ref.Length},
		"wrong partition": {StreamID: ref.StreamID, Partition: ref.Partition + 1, Offset: ref.Offset, Length: ref.Length},
		"wrong encoding":  {StreamID: ref.StreamID, Partition: ref.Partition, Encoding: EncodingArrow + EncodingKafka - ref.Encoding, Offset: ref.Offset, Length: ref.Length},
		"wrong records":   {StreamID: ref.StreamID, Partition: ref.Partition, Records: ref.Records + 1, Offset: ref.Offset, Length: ref.Length},
		"misaligned":      {StreamID: ref.StreamID, Partition: ref.Partition, Offset: ref.Offset + 1, Length: ref.Length},
		"short":           {StreamID: ref.StreamID, Partition: ref.Partition, Offset: ref.Offset, Length: ref.Length - 1},
		"long":            {StreamID: ref.StreamID, Partition: ref.Partition, Offset: ref.Offset, Length: ref.Length + 1},
		"past the end":    {StreamID: ref.StreamID, Partition: ref.Partition, Offset: int64(len(obj)) - 60, Length: 100},
	} {
		if _, err := ReadChunk(ctx, rr, "k", r); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	for name, r := range map[string]ChunkRef{
		"negative offset": {Offset: -1, Length: 100},
		"header only":     {Offset: 0, Length: ChunkHeaderSize},
	} {
		if _, err := ReadChunk(ctx, rr, "k", r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []Class{ClassStandard, ClassExpress, ClassQuorum} {
		got, err := ParseClass(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
	}
	if ClassStandard.String() != "standard" || ClassExpress.String() != "express" || ClassQuorum.String() != "quorum" {
		t.Error("class names changed")
	}
	if Class(0).String() != "class(0)" || Class(4).Valid() {
		t.Error("unknown class")
	}
	for _, s := range []string{"", "Standard", "class(1)", "blockvol"} {
		if _, err := ParseClass(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseClass(%q): %v", s, err)
		}
	}
	for _, e := range []Encoding{EncodingKafka, EncodingArrow} {
		got, err := ParseEncoding(e.String())
		if err != nil || got != e {
			t.Errorf("ParseEncoding(%q) = %v, %v", e.String(), got, err)
		}
	}
	if EncodingKafka.String() != "kafka" || EncodingArrow.String() != "arrow" || Encoding(9).String() != "encoding(9)" {
		t.Error("encoding names changed")
	}
	if _, err := ParseEncoding("parquet"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseEncoding(parquet): %v", err)
	}
}

func TestObjectKey(t *testing.T) {
	id := ulid.MustParse("01JDQ7XW5G0000000000000001")
	k := ObjectKey(ClassExpress, "node-1", id)
	if k != "wal/express/node-1/01JDQ7XW5G0000000000000001.wal" {
		t.Fatalf("ObjectKey = %q", k)
	}
	c, n, got, err := ParseObjectKey(k)
	if err != nil || c != ClassExpress || n != "node-1" || got != id {
		t.Fatalf("ParseObjectKey(%q) = %v %q %v %v", k, c, n, got, err)
	}
	for _, bad := range []string{
		"",
		"wal/express/node-1/01JDQ7XW5G0000000000000001",
		"express/node-1/01JDQ7XW5G0000000000000001.wal",
		"wal/fast/node-1/01JDQ7XW5G0000000000000001.wal",
		"wal/express//01JDQ7XW5G0000000000000001.wal",
		"wal/express/../01JDQ7XW5G0000000000000001.wal",
		"wal/express/a/b/01JDQ7XW5G0000000000000001.wal",
		"wal/express/node-1/01jdq7xw5g0000000000000001.wal",
		"wal/express/node-1/01JDQ7XW5G000000000000000.wal",
		"wal/express/node-1/81JDQ7XW5G0000000000000001.wal",
		"wal/express/node-1/00000000000000000000000000.wal",
		"wal/express/node-1/01JDQ7XW5G0000000000000001.wal.tmp",
	} {
		if _, _, _, err := ParseObjectKey(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseObjectKey(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

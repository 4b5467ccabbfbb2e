package walfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/oklog/ulid/v2"
)

// v2Case is the golden version-2 object: a plaintext chunk and an encrypted one (its
// "sealed" payload a fixed pattern: the codec never looks inside; shared/envelope makes
// real ones).
func v2Case() goldenCase {
	return goldenCase{
		file:   "encrypted.wal",
		header: Header{NodeID: "node-e", ULID: ulid.MustParse("01JDQ7XW5G0000000000000002"), Class: ClassStandard},
		chunks: []Chunk{
			{StreamID: 4, Partition: 0, Encoding: EncodingKafka, Records: 2, MaxTimestamp: 1732870000000, Payload: pattern(40, 80)},
			{StreamID: 3, Partition: 1, Encoding: EncodingKafka, Records: 5, MaxTimestamp: 1732870000500, Payload: pattern(30, 160),
				Encrypted: true, EnvelopeLen: 88},
		},
	}
}

func readGoldenV2(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "v2", "encrypted.wal"))
	if err != nil {
		t.Fatalf("golden file missing (write it once with go test -run TestWriteGoldenV2 -update-golden): %v", err)
	}
	return b
}

func TestWriteGoldenV2(t *testing.T) {
	if !*updateGolden {
		t.Skip("run with -update-golden to write missing golden files")
	}
	obj, refs := v2Case().encode(t)
	writeOnce(t, filepath.Join("testdata", "v2", "encrypted.wal"), obj)
	writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecode", "encrypted"), fuzzSeed(obj))
	for i, r := range refs {
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecodeChunk", "encrypted-"+string(rune('0'+i))), fuzzSeed(obj[r.Offset:r.Offset+r.Length]))
	}
}

// TestGoldenV2: the golden object decodes as it was written, its encrypted chunk as a
// version-2 chunk whose payload is the sealed bytes; encoding the case again gives the same
// bytes; an object of plaintext chunks only is still version 1.
func TestGoldenV2(t *testing.T) {
	obj := readGoldenV2(t)
	again, refs := v2Case().encode(t)
	if !bytes.Equal(obj, again) {
		t.Fatal("encoding the v2 case no longer gives the golden bytes")
	}
	o, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != Version2 || binary.BigEndian.Uint16(obj[8:]) != 2 {
		t.Fatalf("version %d", o.Version)
	}
	if len(o.Chunks) != 2 || !o.Chunks[0].Encrypted || o.Chunks[1].Encrypted || o.Chunks[0].StreamID != 3 || o.Chunks[1].StreamID != 4 {
		t.Fatalf("chunks %+v", o.Chunks)
	}
	for i, ref := range o.Chunks {
		if ref != refs[i] {
			t.Errorf("index entry %d %+v, AppendObject said %+v", i, ref, refs[i])
		}
		got, payload, err := DecodeChunk(obj[ref.Offset : ref.Offset+ref.Length])
		if err != nil {
			t.Fatal(err)
		}
		want := v2Case().chunks[1-i] // sorted: stream 3 first
		if !bytes.Equal(payload, want.Payload) || got.Encrypted != want.Encrypted || got.EnvelopeLen != want.EnvelopeLen {
			t.Errorf("chunk %d: %+v", i, got)
		}
	}
	if ref := o.Chunks[0]; ref.Length != ChunkHeaderSizeV2+160 {
		t.Errorf("encrypted chunk length %d, want %d", ref.Length, ChunkHeaderSizeV2+160)
	}
	// Plaintext only: version 1, byte for byte the v1 layout.
	plain, _ := goldenCases()[0].encode(t)
	if binary.BigEndian.Uint16(plain[8:]) != 1 || !bytes.Equal(plain, readGolden(t, "one-chunk.wal")) {
		t.Fatal("a plaintext object is no longer the v1 golden")
	}
}

func crc32Sum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// TestV2Corruption: an encrypted chunk in a version-1 object, a version-2 chunk without the
// encrypted flag, an envelope length out of range, and index flags that disagree are corrupt.
func TestV2Corruption(t *testing.T) {
	obj := readGoldenV2(t)
	o, _ := Decode(obj)
	enc := o.Chunks[0]
	chunk := func() []byte { return slices.Clone(obj[enc.Offset : enc.Offset+enc.Length]) }
	reseal := func(c []byte) []byte {
		binary.BigEndian.PutUint32(c[48:], crc32Sum(c[:48]))
		return c
	}
	for name, c := range map[string][]byte{
		"no encrypted flag": func() []byte { c := chunk(); c[3] = 0; return reseal(c) }(),
		"envelope 0":        func() []byte { c := chunk(); binary.BigEndian.PutUint16(c[44:], 0); return reseal(c) }(),
		"envelope too long": func() []byte { c := chunk(); binary.BigEndian.PutUint16(c[44:], 160); return reseal(c) }(),
		"reserved":          func() []byte { c := chunk(); c[46] = 1; return reseal(c) }(),
	} {
		if _, _, err := DecodeChunk(c); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The same object claiming version 1 in header and footer.
	v1 := slices.Clone(obj)
	binary.BigEndian.PutUint16(v1[8:], 1)
	resealHeader(v1)
	binary.BigEndian.PutUint16(v1[len(v1)-10:], 1)
	if _, err := Decode(v1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("encrypted chunk in a version-1 object: %v", err)
	}
	// Header and footer versions that differ.
	mixed := slices.Clone(obj)
	binary.BigEndian.PutUint16(mixed[8:], 1)
	resealHeader(mixed)
	if _, err := Decode(mixed); !errors.Is(err, ErrCorrupt) {
		t.Errorf("header v1, footer v2: %v", err)
	}
	if _, _, err := AppendObject(nil, v2Case().header, []Chunk{{StreamID: 1, Encoding: EncodingKafka, Records: 1, Payload: []byte("x"), Encrypted: true, EnvelopeLen: 1}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("envelope filling the payload: %v", err)
	}
}

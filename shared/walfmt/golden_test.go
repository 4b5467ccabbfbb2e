package walfmt

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
)

var updateGolden = flag.Bool("update-golden", false,
	"write missing golden files under testdata/v1 and missing fuzz seeds under testdata/fuzz (never overwrites)")

// goldenCase is one golden v1 object: the header and chunks it was encoded from. The files
// in testdata/v1 were written once from these by TestWriteGolden and are never regenerated:
// every later format version must still read them.
type goldenCase struct {
	file   string
	header Header
	chunks []Chunk // in the order given to AppendObject (not necessarily sorted)
}

// pattern returns n deterministic bytes derived from seed.
func pattern(seed uint32, n int) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func goldenCases() []goldenCase {
	// Arrow chunks are opaque to the codec; this one starts like an Arrow IPC stream
	// message (continuation marker 0xFFFFFFFF, metadata length) to look the part.
	arrow := append([]byte{0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x10}, pattern(9, 88)...)
	return []goldenCase{
		{
			file:   "one-chunk.wal",
			header: Header{NodeID: "node-a", ULID: ulid.MustParse("01JDQ7XW5G0000000000000001"), Class: ClassStandard},
			chunks: []Chunk{
				{StreamID: 1, Partition: 0, Encoding: EncodingKafka, Records: 3, MaxTimestamp: 1732870000000, Payload: pattern(1, 61)},
			},
		},
		{
			file:   "multi.wal",
			header: Header{NodeID: "lognode-7.us-east-1a", ULID: ulid.MustParse("01JDQ7XW5G7ZZZZZZZZZZZZZZZ"), Class: ClassExpress},
			chunks: []Chunk{
				{StreamID: 2, Partition: 1, Encoding: EncodingKafka, Records: 10, MaxTimestamp: 1732870000123, Payload: pattern(21, 200)},
				{StreamID: 9, Partition: 3, Encoding: EncodingArrow, Records: 4, MaxTimestamp: 1732870000999, Payload: arrow},
				{StreamID: 2, Partition: 0, Encoding: EncodingKafka, Records: 1, MaxTimestamp: 1732870000001, Payload: pattern(20, 70)},
				{StreamID: 1 << 40, Partition: 0, Encoding: EncodingKafka, Records: 1, MaxTimestamp: 0, Payload: []byte{0x42}},
				{StreamID: 5, Partition: 1<<31 - 1, Encoding: EncodingKafka, Records: 1 << 33, MaxTimestamp: -1, Payload: pattern(5, 9)},
			},
		},
		{
			file:   "quorum-long-node.wal",
			header: Header{NodeID: strings.Repeat("q", MaxNodeIDLen), ULID: ulid.MustParse("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), Class: ClassQuorum},
			chunks: []Chunk{
				{StreamID: 77, Partition: 12, Encoding: EncodingKafka, Records: 500, MaxTimestamp: 1 << 50, Payload: pattern(77, 4096)},
			},
		},
	}
}

func (g goldenCase) encode(t testing.TB) ([]byte, []ChunkRef) {
	t.Helper()
	chunks := slices.Clone(g.chunks)
	obj, refs, err := AppendObject(nil, g.header, chunks)
	if err != nil {
		t.Fatalf("%s: AppendObject: %v", g.file, err)
	}
	return obj, refs
}

func readGolden(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "v1", file))
	if err != nil {
		t.Fatalf("golden file missing (write it once with go test -run TestWriteGolden -update-golden): %v", err)
	}
	return b
}

// writeOnce creates path with body and refuses to replace an existing file.
func writeOnce(t *testing.T, path string, body []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(old, body) {
			t.Errorf("%s exists and differs from what this test would write; golden files are never regenerated", path)
		} else {
			t.Logf("%s exists, left alone", path)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(body))
}

// fuzzSeed is a file in Go's fuzz corpus format holding one []byte argument.
func fuzzSeed(b []byte) []byte { return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b) }

// TestWriteGolden writes missing golden files and fuzz seeds; it runs only with
// -update-golden and never overwrites a file.
func TestWriteGolden(t *testing.T) {
	if !*updateGolden {
		t.Skip("run with -update-golden to write missing golden files")
	}
	for _, g := range goldenCases() {
		obj, refs := g.encode(t)
		writeOnce(t, filepath.Join("testdata", "v1", g.file), obj)
		name := strings.TrimSuffix(g.file, ".wal")
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecode", name), fuzzSeed(obj))
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecode", name+"-truncated"), fuzzSeed(obj[:len(obj)-1]))
		for i, r := range refs {
			chunk := obj[r.Offset : r.Offset+r.Length]
			writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecodeChunk", fmt.Sprintf("%s-chunk%d", name, i)), fuzzSeed(chunk))
		}
	}
}

// TestGolden checks that the encoder reproduces every golden file byte for byte and that
// Decode, DecodeChunk and ReadIndex read them back to what they were written from.
func TestGolden(t *testing.T) {
	for _, g := range goldenCases() {
		t.Run(g.file, func(t *testing.T) {
			want := readGolden(t, g.file)
			obj, refs := g.encode(t)
			if !bytes.Equal(obj, want) {
				t.Fatalf("encoder output (%d bytes) differs from golden file (%d bytes)", len(obj), len(want))
			}
			o, err := Decode(want)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if o.Header != g.header || o.Version != 1 {
				t.Fatalf("header %+v version %d, want %+v version 1", o.Header, o.Version, g.header)
			}
			if !slices.Equal(o.Chunks, refs) {
				t.Fatalf("Decode refs %+v\nAppendObject refs %+v", o.Chunks, refs)
			}
			sorted := slices.Clone(g.chunks)
			slices.SortFunc(sorted, func(a, b Chunk) int {
				return compareKey(key{a.StreamID, a.Partition}, key{b.StreamID, b.Partition})
			})
			for i, r := range o.Chunks {
				c := sorted[i]
				ref, payload, err := DecodeChunk(want[r.Offset : r.Offset+r.Length])
				if err != nil {
					t.Fatalf("DecodeChunk %d: %v", i, err)
				}
				if !bytes.Equal(payload, c.Payload) {
					t.Errorf("chunk %d payload differs", i)
				}
				wantRef := ChunkRef{StreamID: c.StreamID, Partition: c.Partition, Encoding: c.Encoding,
					Records: c.Records, MaxTimestamp: c.MaxTimestamp, Offset: r.Offset, Length: r.Length}
				if r != wantRef {
					t.Errorf("chunk %d ref %+v, want %+v", i, r, wantRef)
				}
				ref.Offset = r.Offset
				if ref != r {
					t.Errorf("chunk %d DecodeChunk %+v, index %+v", i, ref, r)
				}
			}
			rr := memReader{"k": want}
			o2, err := ReadIndex(t.Context(), rr, "k", int64(len(want)))
			if err != nil {
				t.Fatalf("ReadIndex: %v", err)
			}
			if o2.Header != o.Header || !slices.Equal(o2.Chunks, o.Chunks) {
				t.Fatalf("ReadIndex %+v, Decode %+v", o2, o)
			}
		})
	}
}

// TestGoldenLayout pins a few fields of the golden files by absolute offset, as drawn in
// the package comment, so the drawing and the files cannot drift apart.
func TestGoldenLayout(t *testing.T) {
	obj := readGolden(t, "one-chunk.wal")
	be16 := func(off int) int { return int(obj[off])<<8 | int(obj[off+1]) }
	checks := []struct {
		name      string
		got, want any
	}{
		{"magic", string(obj[0:8]), "LOAMWAL\x00"},
		{"version", be16(8), 1},
		{"header length", be16(10), 34 + 6},
		{"class", obj[12], byte(ClassStandard)},
		{"node id length", obj[29], byte(6)},
		{"node id", string(obj[30:36]), "node-a"},
		{"chunk magic", string(obj[40:42]), "LC"},
		{"chunk version", obj[42], byte(1)},
		{"chunk header length", be16(44), 48},
		{"chunk encoding", obj[46], byte(EncodingKafka)},
		{"index class", obj[40+48+61], byte(ClassStandard)},
		{"footer magic", string(obj[len(obj)-8:]), "LOAMWAL\x00"},
		{"footer version", be16(len(obj) - 10), 1},
		{"size", len(obj), 40 + 48 + 61 + (22 + 6 + 42) + 26},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

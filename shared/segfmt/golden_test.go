package segfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false,
	"write missing golden files under testdata/v1 and missing fuzz seeds under testdata/fuzz (never overwrites)")

// goldenCase is one golden v1 segment: the header and batches it was written from. The
// files in testdata/v1 were written once from these by TestWriteGolden and are never
// regenerated: every later format version must still read them. Batches are uncompressed
// (their bytes are fixed by the Kafka format, not by a codec library's version).
type goldenCase struct {
	file   string
	header Header
	specs  []batchSpec
	extra  []section // optional sections after the batch index
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{
			file:   "one-batch.seg",
			header: Header{Encoding: EncodingKafka, StreamID: 1, Partition: 0, CreatedMs: 1732870000500},
			specs:  []batchSpec{{base: 0, count: 3, ts: 1732870000000, value: 10}},
		},
		{
			// A compacted range: records removed inside batches, whole batches removed,
			// an empty batch, and a range wider than its batches.
			file: "gaps.seg",
			header: Header{Encoding: EncodingKafka, StreamID: 42, Partition: 7, BaseOffset: 100, EndOffset: 200,
				CreatedMs: 1732870999000},
			specs: []batchSpec{
				{base: 103, deltas: []int32{0, 2, 5}, ts: 1732870000100, value: 20},
				{base: 120, count: 2, ts: 1732870000050, value: 0},
				{base: 150, empty: true, count: 10, ts: 1732870000300},
				{base: 160, deltas: []int32{3}, ts: 1732870000200, value: 9},
			},
		},
		{
			file: "wide.seg",
			header: Header{Encoding: EncodingKafka, StreamID: 1<<63 + 5, Partition: 1<<31 - 1,
				CreatedMs: 1 << 50},
			specs: []batchSpec{
				{base: 1 << 40, count: 2, ts: 1 << 45, value: 4096},
				{base: 1<<40 + 2, count: 1, ts: 0, value: 1},
				{base: 1<<40 + 3, count: 40, ts: 1<<45 - 7, value: 30},
			},
		},
		{
			// What a version 1 reader sees of a later writer's optional section.
			file:   "optional-section.seg",
			header: Header{Encoding: EncodingKafka, StreamID: 2, Partition: 3, CreatedMs: 1732870000000},
			specs:  []batchSpec{{base: 77, count: 1, ts: 1732870000000, value: 5}},
			extra:  []section{{typ: 0x7001, flags: SectionOptional, body: []byte("reserved for a later version")}},
		},
	}
}

func (g goldenCase) encode(t testing.TB) ([]byte, Info) {
	t.Helper()
	w, err := NewWriter(g.header)
	if err != nil {
		t.Fatalf("%s: NewWriter: %v", g.file, err)
	}
	for i, s := range g.specs {
		if err := w.Add(s.build(t)); err != nil {
			t.Fatalf("%s: Add %d: %v", g.file, i, err)
		}
	}
	obj, info, err := w.finish(g.extra)
	if err != nil {
		t.Fatalf("%s: Finish: %v", g.file, err)
	}
	return obj, info
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
		obj, info := g.encode(t)
		writeOnce(t, filepath.Join("testdata", "v1", g.file), obj)
		name := strings.TrimSuffix(g.file, ".seg")
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecode", name), fuzzSeed(obj))
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecode", name+"-truncated"), fuzzSeed(obj[:len(obj)-1]))
		// The index and trailer parse alone, behind a data region of zeros (the fuzzer
		// need not carry real batches to reach the index checks).
		blank := append(make([]byte, info.IndexOffset()), obj[info.IndexOffset():]...)
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzReadInfo", name), fuzzSeed(blank))
	}
}

// TestGolden checks that the encoder reproduces every golden file byte for byte and that
// Decode, ReadInfo and ReadInfoAt read them back to what they were written from.
func TestGolden(t *testing.T) {
	for _, g := range goldenCases() {
		t.Run(g.file, func(t *testing.T) {
			want := readGolden(t, g.file)
			obj, info := g.encode(t)
			if !bytes.Equal(obj, want) {
				t.Fatalf("encoder output (%d bytes) differs from the golden file (%d bytes)", len(obj), len(want))
			}
			d, err := Decode(want)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !equalInfo(d, &info) {
				t.Fatalf("Decode\n %+v\nwriter\n %+v", d, info)
			}
			for i, s := range g.specs {
				r := d.Batches[i]
				if !bytes.Equal(want[r.Offset:r.Offset+int64(r.Length)], s.build(t)) {
					t.Errorf("batch %d is not the batch written", i)
				}
			}
			rr := memReader{"k": want}
			ri, err := ReadInfo(t.Context(), rr, "k", int64(len(want)))
			if err != nil || !equalInfo(ri, d) {
				t.Fatalf("ReadInfo: %v", err)
			}
			ra, err := ReadInfoAt(t.Context(), rr, "k", d.DataOffset+d.DataLength)
			if err != nil || !equalInfo(ra, d) {
				t.Fatalf("ReadInfoAt: %v", err)
			}
		})
	}
}

// TestGoldenLayout pins fields of a golden file by absolute offset, as drawn in the
// package comment, so that the drawing and the files cannot drift apart.
func TestGoldenLayout(t *testing.T) {
	obj := readGolden(t, "gaps.seg")
	be := binary.BigEndian
	u16 := func(off int) uint16 { return be.Uint16(obj[off:]) }
	u32 := func(off int) uint32 { return be.Uint32(obj[off:]) }
	u64 := func(off int) uint64 { return be.Uint64(obj[off:]) }
	end := len(obj)
	trl := end - TrailerSize
	idx := int(u64(trl + 16))
	sec := idx + 92
	e := func(k, field int) int { return sec + 8 + 4 + k*36 + field }
	checks := []struct {
		name      string
		got, want any
	}{
		{"magic", string(obj[0:8]), "LOAMSEG\x00"},
		{"version", u16(8), uint16(1)},
		{"header length", u16(10), uint16(92)},
		{"encoding", obj[12], byte(EncodingKafka)},
		{"stream id", u64(16), uint64(42)},
		{"partition", u32(24), uint32(7)},
		{"batch count", u32(28), uint32(4)},
		{"base offset", u64(32), uint64(100)},
		{"end offset", u64(40), uint64(200)},
		{"offset count", u64(48), uint64(6 + 2 + 10 + 4)},
		{"record count", u64(56), uint64(3 + 2 + 0 + 1)},
		{"min timestamp", u64(64), uint64(1732870000050)},
		{"max timestamp", u64(72), uint64(1732870000305)},
		{"created", u64(80), uint64(1732870999000)},
		{"first batch base offset", u64(92), uint64(103)},
		{"first batch magic", obj[92+16], byte(2)},
		{"trailer data offset", u64(trl), uint64(92)},
		{"trailer index offset", u64(trl + 16), u64(trl) + u64(trl+8)},
		{"trailer index length", int(u32(trl + 24)), trl - idx},
		{"trailer version", u16(end - 10), uint16(1)},
		{"trailer magic", string(obj[end-8:]), "LOAMSEG\x00"},
		{"header copy", string(obj[idx : idx+92]), string(obj[:92])},
		{"section type", u16(sec), SectionBatchIndex},
		{"section flags", u16(sec + 2), uint16(0)},
		{"section length", u32(sec + 4), uint32(4 + 4*36)},
		{"entry count", u32(sec + 8), uint32(4)},
		{"entry 2 base offset", u64(e(2, 0)), uint64(150)},
		{"entry 2 offset count", u32(e(2, 8)), uint32(10)},
		{"entry 2 max timestamp", u64(e(2, 12)), uint64(1732870000305)},
		{"entry 0 byte offset", u64(e(0, 20)), uint64(0)},
		{"entry 1 byte offset", u64(e(1, 20)), uint64(u32(e(0, 28)))},
		{"entry 1 base offset at its batch", u64(92 + int(u64(e(1, 20)))), uint64(120)},
		{"size", end, idx + 92 + 8 + 4 + 4*36 + 42},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

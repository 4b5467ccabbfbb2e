package coord

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenItem is the item encoded in testdata/v1/item.bin.
var goldenItem = Item{
	Version:  0x0123456789abcdef,
	Attrs:    map[string]string{"zone": "us-east-1a", "ünï": "", "http": "10.0.0.1:8080"},
	Counters: map[string]int64{"segment": 123456789, "neg": -5, "max": math.MaxInt64, "min": math.MinInt64},
}

const goldenExpiry = 1_900_000_002

// TestItemGolden: the v1 encoding of goldenItem is the kept file, byte for byte, and the
// file decodes to it. The file is never regenerated; LOAM_WRITE_GOLDEN=1 only writes a
// missing one.
func TestItemGolden(t *testing.T) {
	path := filepath.Join("testdata", "v1", "item.bin")
	enc := appendItem(nil, goldenItem, goldenExpiry)
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && os.Getenv("LOAM_WRITE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, enc, 0o644); err != nil {
			t.Fatal(err)
		}
		want = enc
	} else if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, want)
	}
	it, exp, err := decodeItem(want)
	if err != nil {
		t.Fatal(err)
	}
	if exp != goldenExpiry || !sameDecoded(it, goldenItem) {
		t.Fatalf("decoded %+v exp %d, want %+v exp %d", it, exp, goldenItem, goldenExpiry)
	}
}

func sameDecoded(a, b Item) bool {
	return a.Version == b.Version && maps.Equal(a.Attrs, b.Attrs) && maps.Equal(a.Counters, b.Counters)
}

// withCRC replaces the last four bytes of b with the CRC32C of the rest.
func withCRC(b []byte) []byte {
	b = bytes.Clone(b[:len(b)-4])
	return appendCRC(b)
}

func appendCRC(b []byte) []byte {
	sum := crc32c(b)
	return append(b, byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum))
}

func TestItemDecodeErrors(t *testing.T) {
	good := appendItem(nil, Item{Version: 7, Attrs: map[string]string{"a": "1", "b": "2"}, Counters: map[string]int64{"c": 3}}, 0)
	if _, _, err := decodeItem(good); err != nil {
		t.Fatal(err)
	}
	empty := appendItem(nil, Item{Version: 1}, 0)
	if len(empty) != itemMinLen {
		t.Fatalf("empty item is %d bytes, itemMinLen %d", len(empty), itemMinLen)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	header := func(version int64, exp int64) []byte {
		b := appendItem(nil, Item{Version: 1}, 0)
		b = b[:len(b)-4]
		for i := range 8 {
			b[5+i] = byte(uint64(version) >> (56 - 8*i))
			b[13+i] = byte(uint64(exp) >> (56 - 8*i))
		}
		return appendCRC(b)
	}
	body := func(rest ...byte) []byte {
		b := appendItem(nil, Item{Version: 1}, 0)
		return appendCRC(append(b[:itemHeaderLen], rest...))
	}
	if got, want := crc32c(good[:len(good)-4]), uint32(good[len(good)-4])<<24|uint32(good[len(good)-3])<<16|uint32(good[len(good)-2])<<8|uint32(good[len(good)-1]); got != want {
		t.Fatalf("test crc32c %08x, encoder %08x", got, want)
	}
	cases := []struct {
		name string
		b    []byte
		want string // in the error message
	}{
		{"nil", nil, "want at least"},
		{"short", good[:itemMinLen-1], "want at least"},
		{"bad magic", mod(func(b []byte) []byte { b[0] = 'X'; return withCRC(b) }), "bad magic"},
		{"unknown version", mod(func(b []byte) []byte { b[4] = 2; return withCRC(b) }), "unknown format version"},
		{"bad crc", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "crc32c"},
		{"flipped body bit", mod(func(b []byte) []byte { b[itemHeaderLen+2] ^= 0x10; return b }), "crc32c"},
		{"zero version", header(0, 0), "zero version"},
		{"negative expiry", header(1, -1), "negative expiry"},
		{"huge attr count", body(0xff, 0xff, 0xff, 0xff, 0x0f, 0), "exceeds"},
		{"truncated attr", body(1, 5, 'a'), "string of 5 bytes"},
		{"empty attr name", body(1, 0, 0, 0), "bad name"},
		{"non-UTF-8 name", body(1, 1, 0xff, 0, 0), "bad name"},
		{"non-UTF-8 value", body(1, 1, 'a', 1, 0xff, 0), "not UTF-8"},
		{"unordered attrs", body(2, 1, 'b', 0, 1, 'a', 0, 0), "out of order"},
		{"duplicate attrs", body(2, 1, 'a', 0, 1, 'a', 0, 0), "out of order"},
		{"duplicate counter", body(0, 2, 1, 'c', 2, 1, 'c', 4), "out of order"},
		{"bad varint", body(0, 1, 1, 'c', 0x80, 0x80), "bad varint"},
		{"trailing bytes", body(0, 0, 0), "trailing"},
		{"missing counters", body(0), "want at least"},
		{"overlong uvarint", body(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0), "bad uvarint"},
	}
	for _, tc := range cases {
		it, _, err := decodeItem(tc.b)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decodeItem = %+v, %v; want ErrCorrupt with %q", tc.name, it, err, tc.want)
		}
	}
}

func crc32c(b []byte) uint32 {
	// Same table as the encoder; kept separate so a broken encoder CRC is caught by the
	// golden file rather than hidden here.
	var crc uint32 = 0xffffffff
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82f63b78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// FuzzDecodeItem: decodeItem never panics, fails only with ErrCorrupt, and whatever it
// accepts is an item Put would accept and re-encodes canonically (no longer than the input)
// to bytes that decode to the same item. Each input is decoded as is and with a valid
// CRC32C appended, so the fuzzer gets past the checksum into the structure.
func FuzzDecodeItem(f *testing.F) {
	body := func(it Item, exp int64) []byte {
		b := appendItem(nil, it, exp)
		return b[:len(b)-4]
	}
	f.Add(body(goldenItem, goldenExpiry))
	f.Add(body(Item{Version: 1}, 0))
	f.Add(body(Item{Version: -1, Attrs: map[string]string{"a": ""}, Counters: map[string]int64{"z": -1}}, 1))
	f.Add(appendItem(nil, goldenItem, goldenExpiry))
	f.Add([]byte("LCIT\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		check(t, appendCRC(bytes.Clone(b)))
	})
}

func check(t *testing.T, b []byte) {
	it, exp, err := decodeItem(b)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error without ErrCorrupt: %v", err)
		}
		return
	}
	if it.Version == 0 || exp < 0 {
		t.Fatalf("accepted version %d expiry %d", it.Version, exp)
	}
	if err := checkItem(Item{PK: "p", SK: "s", Attrs: it.Attrs, Counters: it.Counters}); err != nil {
		t.Fatalf("accepted an item Put would refuse: %v", err)
	}
	enc := appendItem(nil, it, exp)
	it2, exp2, err := decodeItem(enc)
	if err != nil || exp2 != exp || !sameDecoded(it, it2) {
		t.Fatalf("re-encoding: %+v %d %v, want %+v %d", it2, exp2, err, it, exp)
	}
	if len(enc) > len(b) {
		t.Fatalf("re-encoding grew %d → %d bytes", len(b), len(enc))
	}
}

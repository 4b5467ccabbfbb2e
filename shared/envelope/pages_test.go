package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var updatePages = flag.Bool("update-pages", false, "rewrite testdata/v1/pages.bin")

// zeroReader makes the golden object's data key and nonce all zeros, so its bytes are fixed.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

const goldenObject = "ns/7/seg/3/0/00000000000000000000-01JDQ8ZK3M4N5P6Q7R8S9T0V1W.seg"

func goldenPlain() []byte {
	b := make([]byte, MinPageSize*2+100) // three pages, the last short
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// TestPagesGolden: the sealed page layout's bytes are fixed (a deterministic data key):
// testdata/v1/pages.bin holds 4 KiB pages of a known plaintext under kek 0x09…; the
// header's fields sit where the layout says, and the file opens to the plaintext.
func TestPagesGolden(t *testing.T) {
	kek := bytes.Repeat([]byte{9}, 32)
	got, err := sealPages(zeroReader{}, kek, "01JDQ8ZK3M4N5P6Q7R8S9T0V1W", goldenObject, MinPageSize, goldenPlain())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "v1", "pages.bin")
	if *updatePages {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("sealed pages differ from %s (%d bytes, want %d)", path, len(got), len(want))
	}
	if string(want[:4]) != "LSP1" || want[4] != 1 || want[5] != 26 || string(want[6:32]) != "01JDQ8ZK3M4N5P6Q7R8S9T0V1W" ||
		binary.BigEndian.Uint32(want[70:]) != MinPageSize || binary.BigEndian.Uint64(want[74:]) != uint64(len(goldenPlain())) {
		t.Fatalf("header fields not where the layout puts them: % x", want[:82])
	}
	if len(want) != PagesHeaderLen+len(goldenPlain())+3*16 {
		t.Fatalf("%d bytes, want header + plaintext + 3 tags", len(want))
	}
	pt, err := OpenPages(kek, goldenObject, want)
	if err != nil || !bytes.Equal(pt, goldenPlain()) {
		t.Fatalf("golden file opens to %d bytes, %v", len(pt), err)
	}
}

// TestPagesRanges: every range of a sealed object opens to the same bytes as the
// plaintext's, reading only the pages that cover it.
func TestPagesRanges(t *testing.T) {
	kek := bytes.Repeat([]byte{3}, 32)
	plain := goldenPlain()
	sealed, err := SealPages(kek, "K1", goldenObject, MinPageSize, plain)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParsePagesHeader(sealed)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := h.dataKey(kek, goldenObject)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 1}, {0, int64(len(plain))}, {MinPageSize - 1, 2}, {MinPageSize, MinPageSize}, {int64(len(plain)) - 1, 1}, {5000, 3000}, {100, 3}} {
		from, to, soff, sn := h.pageSpan(r[0], r[1])
		pt, err := h.openPages(nil, aead, goldenObject, from, to, sealed[soff:soff+sn])
		if err != nil {
			t.Fatalf("range %v: %v", r, err)
		}
		got := pt[r[0]-from*h.PageSize:][:r[1]]
		if !bytes.Equal(got, plain[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: wrong bytes", r)
		}
		if wantPages := (r[0]+r[1]-1)/MinPageSize - r[0]/MinPageSize + 1; to-from != wantPages {
			t.Fatalf("range %v read %d pages, want %d", r, to-from, wantPages)
		}
	}
	empty, err := SealPages(kek, "K1", goldenObject, MinPageSize, nil)
	if err != nil || len(empty) != PagesHeaderLen {
		t.Fatalf("empty object: %d bytes, %v", len(empty), err)
	}
	if pt, err := OpenPages(kek, goldenObject, empty); err != nil || len(pt) != 0 {
		t.Fatalf("empty object opens to %d bytes, %v", len(pt), err)
	}
}

// TestPagesTampering: a flipped byte anywhere, pages swapped, the object renamed or
// truncated, a wrong key: none opens.
func TestPagesTampering(t *testing.T) {
	kek := bytes.Repeat([]byte{3}, 32)
	sealed, err := SealPages(kek, "K1", goldenObject, MinPageSize, goldenPlain())
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, obj string, b []byte, key []byte) {
		t.Helper()
		if pt, err := OpenPages(key, obj, b); !errors.Is(err, ErrSealed) || pt != nil {
			t.Errorf("%s: %d bytes, %v; want ErrSealed and nothing", what, len(pt), err)
		}
	}
	for _, at := range []int{0, 4, 5, 6, 40, 70, 74, 82, 100, PagesHeaderLen, PagesHeaderLen + 5000, len(sealed) - 1} {
		b := bytes.Clone(sealed)
		b[at] ^= 0x20
		refused(fmt.Sprintf("flipped byte %d", at), goldenObject, b, kek)
	}
	swapped := bytes.Clone(sealed)
	p0, p1 := swapped[PagesHeaderLen:PagesHeaderLen+MinPageSize+16], swapped[PagesHeaderLen+MinPageSize+16:PagesHeaderLen+2*(MinPageSize+16)]
	tmp := bytes.Clone(p0)
	copy(p0, p1)
	copy(p1, tmp)
	refused("pages 0 and 1 swapped", goldenObject, swapped, kek)
	refused("another object key", "ns/7/seg/3/0/00000000000000000000-01JDQ8ZK3M4N5P6Q7R8S9T0V1X.seg", sealed, kek)
	refused("truncated", goldenObject, sealed[:len(sealed)-16], kek)
	refused("wrong key", goldenObject, sealed, bytes.Repeat([]byte{4}, 32))
	// A page's length field changed and resealed cannot be forged; a header claiming a
	// shorter plaintext does not unwrap the data key.
	short := bytes.Clone(sealed)
	binary.BigEndian.PutUint64(short[74:], MinPageSize)
	refused("length shortened", goldenObject, short[:PagesHeaderLen+MinPageSize+16], kek)
}

func FuzzPages(f *testing.F) {
	kek := make([]byte, 32)
	sealed, _ := SealPages(kek, "K1", "ns/1/seg/x.seg", MinPageSize, []byte("x"))
	f.Add(sealed)
	f.Add(sealed[:PagesHeaderLen])
	f.Add([]byte("LSP1\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Only genuine objects open, and the only genuine one seals "x".
		if pt, err := OpenPages(kek, "ns/1/seg/x.seg", b); err == nil && !bytes.Equal(pt, []byte("x")) {
			t.Fatalf("forged input opened to %q", pt)
		}
		h, err := ParsePagesHeader(b)
		if err != nil {
			return
		}
		if h.PageSize < MinPageSize || h.PageSize > MaxPageSize || h.Length < 0 || h.KeyID == "" || h.StoredSize() < PagesHeaderLen {
			t.Fatalf("accepted header %+v", h)
		}
		if h.Length > 0 {
			from, to, soff, sn := h.pageSpan(0, h.Length)
			if from != 0 || to != h.Pages() || soff != PagesHeaderLen || soff+sn != h.StoredSize() {
				t.Fatalf("page span of the whole object: %d-%d at %d+%d, stored %d", from, to, soff, sn, h.StoredSize())
			}
		}
	})
}

package recordbatch

import (
	"errors"
	"testing"
)

// TestSetBaseOffsets: each batch of a concatenation gets its offset (the previous one's
// base + lastOffsetDelta + 1), CRCs untouched; input that does not frame fails with the
// batches before it patched.
func TestSetBaseOffsets(t *testing.T) {
	var cat []byte
	for _, n := range []int{3, 1, 5} {
		cat = mustAppend(t, cat, textRecords(n, 20, uint64(n)), DefaultBuildOptions())
	}
	if err := SetBaseOffsets(cat, 100); err != nil {
		t.Fatal(err)
	}
	bs, err := Validate(cat)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{100, 103, 104} {
		if bs[i].BaseOffset != want {
			t.Fatalf("batch %d at base %d, want %d", i, bs[i].BaseOffset, want)
		}
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"cut header", cat[:len(cat)-len(bs[2].Raw)+10], ErrTruncated},
		{"cut batch", cat[:len(cat)-1], ErrCorrupt},
	} {
		if err := SetBaseOffsets(append([]byte(nil), tc.in...), 0); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

package objstore

import (
	"strings"
	"testing"
)

// FuzzEscapePart: file names decode back to their key part, and no escaped part can be
// mistaken for a directory ('%' suffix), a temporary file ("%tmp-"), or a path.
func FuzzEscapePart(f *testing.F) {
	for _, s := range []string{"a", "%", "%25", "100%", "%tmp-1", "a\x00b", "日本", "..x", "%00", "%2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, part string) {
		if keyProblem(part) != "" || strings.Contains(part, "/") {
			return // not a key part
		}
		name := escapePart(part)
		if strings.HasSuffix(name, "%") || strings.Contains(name, "%t") || strings.ContainsAny(name, "/\x00") {
			t.Fatalf("escapePart(%q) = %q: could be a directory, a temp file or a path", part, name)
		}
		got, ok := unescapePart(name)
		if !ok || got != part {
			t.Fatalf("unescapePart(escapePart(%q) = %q) = %q, %v", part, name, got, ok)
		}
		// Any name that decodes must encode back to itself: one name per part.
		if p2, ok := unescapePart(part); ok && escapePart(p2) != part {
			t.Fatalf("name %q decodes to %q, which encodes to %q", part, p2, escapePart(p2))
		}
	})
}

func TestRangeBounds(t *testing.T) {
	for _, tc := range []struct {
		size, off, n, lo, hi int64
		ok                   bool
	}{
		{10, 0, -1, 0, 10, true}, {10, 2, 3, 2, 5, true}, {10, 8, 5, 8, 10, true},
		{10, 10, 1, 10, 10, true}, {10, 10, -1, 10, 10, true}, {0, 0, 5, 0, 0, true},
		{10, 11, 0, 0, 0, false}, {10, -1, 1, 0, 0, false}, {10, 0, 1 << 62, 0, 10, true},
		{10, 5, 0, 5, 5, true},
	} {
		lo, hi, err := rangeBounds("k", tc.size, tc.off, tc.n)
		if (err == nil) != tc.ok || (tc.ok && (lo != tc.lo || hi != tc.hi)) {
			t.Errorf("rangeBounds(size %d, %d, %d) = %d, %d, %v", tc.size, tc.off, tc.n, lo, hi, err)
		}
	}
}

package coord

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

// FuzzWALWorkName: parsing a stored counter name never panics; it either fails with
// ErrCorrupt or yields a partition whose name parses back to itself.
func FuzzWALWorkName(f *testing.F) {
	for _, s := range []string{"1/0", "18446744073709551615/2147483647", "0/-1", "1/2/3", "/", "x/1", "1/", "01/002", "1/+2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, err := parseWALWorkName(name)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%q: %v, want ErrCorrupt", name, err)
			}
			return
		}
		if p.Partition < 0 {
			t.Fatalf("%q: negative partition %d", name, p.Partition)
		}
		back, err := parseWALWorkName(walWorkName(p))
		if err != nil || back != p {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", name, p, back, err)
		}
	})
}

// FuzzOrphanItem: decoding a stored orphan record never panics; a good one keeps its
// first-seen time.
func FuzzOrphanItem(f *testing.F) {
	for _, s := range []string{"0", "1700000000000", "-1", "x", "", "9223372036854775807", "99999999999999999999"} {
		f.Add("wal/a.wal", s)
	}
	f.Fuzz(func(t *testing.T, key, first string) {
		o, err := orphanOf(Item{PK: orphansPK, SK: key, Attrs: map[string]string{"first": first}})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%q: %v, want ErrCorrupt", first, err)
			}
			return
		}
		ms, perr := strconv.ParseInt(first, 10, 64)
		if perr != nil || o.Key != key || !o.FirstSeen.Equal(time.UnixMilli(ms)) {
			t.Fatalf("%q %q: %+v", key, first, o)
		}
	})
}

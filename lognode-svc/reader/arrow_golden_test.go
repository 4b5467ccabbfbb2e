package reader

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segfmt"
)

var updateArrowGolden = flag.Bool("update-arrow-golden", false, "write testdata/arrow-v1.seg and its rows if missing (never overwrites)")

const (
	goldenSeg  = "testdata/arrow-v1.seg"
	goldenRows = "testdata/arrow-v1.rows"
)

// writeArrowGolden writes, once, an arrow segment the segmenter made of 200 rows of two
// schema versions (Schema10, then Schema10v2) and the rows as fetch renders them.
func writeArrowGolden(t *testing.T) {
	if _, err := os.Stat(goldenSeg); !errors.Is(err, os.ErrNotExist) {
		t.Logf("%s exists, left alone", goldenSeg)
		return
	}
	f := newArrowFixture(t, 4, 50, true)
	rows, offs := readAll(t, f.bucket, f.meta, 0, nil, 1<<20)
	f.segment(t, 64<<20)
	es := f.meta.Entries(2, 0)
	if len(es) != 1 {
		t.Fatalf("%d segments", len(es))
	}
	obj, err := f.bucket.Get(context.Background(), es[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&sb, "%d %s\n", offs[i], r)
	}
	if err := os.MkdirAll(filepath.Dir(goldenSeg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenSeg, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenRows, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes) and %s", goldenSeg, len(obj), goldenRows)
}

// TestArrowSegmentGolden: an arrow segment as the first version of the segmenter wrote it
// (real column chunks and schemas of two versions) still reads back, every column and
// projected, to the rows the WAL fetch answered before it was written.
func TestArrowSegmentGolden(t *testing.T) {
	if *updateArrowGolden {
		writeArrowGolden(t)
	}
	obj, err := os.ReadFile(goldenSeg)
	if err != nil {
		t.Fatalf("golden file missing (write it once with -update-arrow-golden): %v", err)
	}
	want, err := os.ReadFile(goldenRows)
	if err != nil {
		t.Fatal(err)
	}
	info, err := segfmt.Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if info.Header.Encoding != segfmt.EncodingArrow || len(info.Arrow.Schemas) != 2 {
		t.Fatalf("golden segment: %+v, %d schemas", info.Header, len(info.Arrow.Schemas))
	}
	mem := objstore.NewMem()
	key := segfmt.ObjectKey(2, 0, 0, "golden")
	if err := mem.Put(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
	m := metafake.New()
	m.AddStream(2, 1)
	m.Commit(2, 0, meta.IndexEntry{Count: info.Header.EndOffset - info.Header.BaseOffset, Kind: meta.KindSegment, Object: key,
		Offset: info.DataOffset, Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp})
	rows, offs := readAll(t, mem, m, 0, nil, 1<<20)
	var sb strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&sb, "%d %s\n", offs[i], r)
	}
	if !bytes.Equal([]byte(sb.String()), want) {
		t.Fatalf("rows read from the golden segment differ from %s:\n%.400s", goldenRows, sb.String())
	}
	// The second schema version's column, from its first row.
	got, offs := readAll(t, mem, m, 100, []string{"note"}, 1<<20)
	if len(got) != 100 || offs[0] != 100 || got[0] != `{"note":"n100"}` || got[99] != `{"note":"n199"}` {
		t.Fatalf("note column: %d rows from %d: %q", len(got), offs[0], got)
	}
}

package gc

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/objstore"
)

// TestGCOrphanSealedSegments: the orphan sweep finds the unreferenced segments of keyed
// namespaces (ns/<id>/seg/...) and deletes them after grace, leaves their referenced
// ones, and never touches the namespace's wrapped keys (ns/<id>/keys/...).
func TestGCOrphanSealedSegments(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	const orphan, live, key = "ns/3/seg/1/0/00000000000000000000-A.seg", "ns/3/seg/1/0/00000000000000000010-B.seg", "ns/3/keys/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.key"
	for _, k := range []string{orphan, live, key} {
		b.Put(ctx, k, []byte("x"))
	}
	now := time.Now().Add(time.Hour)
	m := &fakeMeta{refs: map[string]bool{live: true}, retired: map[string]int64{}}
	g, _ := New(Config{Bucket: b, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 2 * time.Minute, OrphanInterval: 2 * time.Minute,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6 * time.Minute)
	st, err := g.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := keys(t, b); st.Orphans != 1 || !slices.Equal(left, []string{key, live}) {
		t.Fatalf("orphan sweep: %+v, left %v; want the orphan segment deleted, the live one and the key kept", st, left)
	}
}

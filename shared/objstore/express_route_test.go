package objstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/objstore/objstoretest"
)

func TestRoutedConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		r, err := objstore.NewRouted(objstore.NewMem(), newExpress(t))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}, objstoretest.SkipIfAbsentRace(expressRace))
}

// TestRoutedKeys: express WAL keys live on the express bucket only, every other key on the
// base only, and a listing that covers both merges them in key order.
func TestRoutedKeys(t *testing.T) {
	ctx := context.Background()
	base, exp := objstore.NewMem(), objstore.NewMem()
	r, err := objstore.NewRouted(base, exp)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"seg/1/0/0-A.seg", "wal/standard/n1/B.wal", "wal/express/n1/C.wal", "wal/express/n2/D.wal", "wal/a", "wal/expresso", "wal/z"}
	for _, k := range keys {
		if err := r.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		_, errB := base.Stat(ctx, k)
		_, errE := exp.Stat(ctx, k)
		if objstore.IsExpressKey(k) != (errE == nil) || objstore.IsExpressKey(k) == (errB == nil) {
			t.Errorf("%s: on base %v, on express %v", k, errB == nil, errE == nil)
		}
		if got, err := r.Get(ctx, k); err != nil || string(got) != k {
			t.Errorf("Get %s = %q, %v", k, got, err)
		}
	}
	for _, prefix := range []string{"", "wal/", "wal/express/", "wal/express/n2/", "wal/e", "seg/"} {
		var got []string
		if err := r.List(ctx, prefix, func(o objstore.ObjectInfo) error { got = append(got, o.Key); return nil }); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range keys {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	if err := r.Delete(ctx, "wal/express/n1/C.wal"); err != nil {
		t.Fatal(err)
	}
	if _, err := exp.Stat(ctx, "wal/express/n1/C.wal"); err == nil {
		t.Error("Delete of an express key left it on the express bucket")
	}
	if _, err := objstore.NewRouted(nil, exp); err == nil {
		t.Error("NewRouted without a base bucket: no error")
	}
}

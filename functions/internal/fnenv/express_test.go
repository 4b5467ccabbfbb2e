package fnenv

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

func TestExpressBucket(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	t.Setenv("LOAM_EXPRESS_BUCKETS", "")
	if b, err := expressBucket(ctx, base); err != nil || b != objstore.Bucket(base) {
		t.Fatalf("unset: %v %v", b, err)
	}
	d := t.TempDir()
	t.Setenv("LOAM_EXPRESS_BUCKETS", filepath.Join(d, "a")+","+filepath.Join(d, "b")+","+filepath.Join(d, "c"))
	t.Setenv("LOAM_EXPRESS_ZONES", "x,y,z")
	b, err := expressBucket(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := b.(*objstore.Routed)
	if !ok {
		t.Fatalf("bucket %T, want *objstore.Routed", b)
	}
	if zs := r.Express.(*objstore.Express).Zones(); zs[0].Name != "x" || zs[2].Name != "z" {
		t.Fatalf("zones %v", zs)
	}
	t.Setenv("LOAM_EXPRESS_BUCKETS", "a,b")
	if _, err := expressBucket(ctx, objstore.NewMem()); err == nil {
		t.Fatal("two express buckets: no error")
	}
}

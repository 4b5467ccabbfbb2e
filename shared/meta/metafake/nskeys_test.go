package metafake

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// TestNamespaceKeys: the fake keeps the sequencer's rules for namespace keys.
func TestNamespaceKeys(t *testing.T) {
	ctx := context.Background()
	f := New()
	if _, err := f.AttachNamespaceKey(ctx, "a", ""); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("empty arn: %v", err)
	}
	if _, err := f.RotateNamespaceKey(ctx, "a", ""); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("rotate without a key: %v", err)
	}
	k, err := f.AttachNamespaceKey(ctx, "a", "alias/a")
	if err != nil || k.ID != 1 || k.Generation != 1 || k.State != meta.NamespaceKeyActive {
		t.Fatalf("attach: %+v %v", k, err)
	}
	if _, err := f.AttachNamespaceKey(ctx, "a", "alias/b"); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("another key: %v", err)
	}
	if k, _ := f.AttachNamespaceKey(ctx, "b", "alias/b"); k.ID != 2 {
		t.Fatalf("second namespace id %d", k.ID)
	}
	if k, err := f.RotateNamespaceKey(ctx, "a", "alias/a2"); err != nil || k.Generation != 2 || k.KeyARN != "alias/a2" {
		t.Fatalf("rotate: %+v %v", k, err)
	}
	if _, err := f.AckNamespaceShred(ctx, "a", "n1"); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("confirm before shred: %v", err)
	}
	if k, err := f.ShredNamespaceKey(ctx, "a"); err != nil || !k.Shredded() {
		t.Fatalf("shred: %+v %v", k, err)
	}
	for _, n := range []string{"n2", "n1", "n2"} {
		if _, err := f.AckNamespaceShred(ctx, "a", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.RotateNamespaceKey(ctx, "a", ""); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("rotate after shred: %v", err)
	}
	ks, _ := f.ListNamespaceKeys(ctx)
	if len(ks) != 2 || ks[0].Namespace != "a" || !slices.Equal(ks[0].Dropped, []string{"n1", "n2"}) {
		t.Fatalf("listed %+v", ks)
	}
}

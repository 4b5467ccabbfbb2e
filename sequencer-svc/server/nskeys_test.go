package server

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// TestNamespaceKeysOnNode: attach, rotate, shred, confirm and list on a real node, in
// process and over gRPC (loam.meta.v1.NamespaceKeys), with the same answers and errors.
func TestNamespaceKeysOnNode(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	t.Cleanup(func() { n.Close() })
	ctx := context.Background()
	for name, c := range clients(t, n) {
		ns := "k-" + name
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AttachNamespaceKey(ctx, ns, ""); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: empty arn: %v", name, err)
		}
		if _, err := c.AttachNamespaceKey(ctx, "nope", "alias/x"); !errors.Is(err, meta.ErrNamespaceNotFound) {
			t.Fatalf("%s: missing namespace: %v", name, err)
		}
		k, err := c.AttachNamespaceKey(ctx, ns, "alias/"+ns)
		if err != nil || k.Generation != 1 || k.ID == 0 || k.State != meta.NamespaceKeyActive {
			t.Fatalf("%s: attach: %+v %v", name, k, err)
		}
		if r, err := c.RotateNamespaceKey(ctx, ns, ""); err != nil || r.Generation != 2 || r.ID != k.ID {
			t.Fatalf("%s: rotate: %+v %v", name, r, err)
		}
		if _, err := c.AckNamespaceShred(ctx, ns, "n1"); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: confirm before shred: %v", name, err)
		}
		if s, err := c.ShredNamespaceKey(ctx, ns); err != nil || !s.Shredded() {
			t.Fatalf("%s: shred: %+v %v", name, s, err)
		}
		if a, err := c.AckNamespaceShred(ctx, ns, "n1"); err != nil || !slices.Equal(a.Dropped, []string{"n1"}) {
			t.Fatalf("%s: confirm: %+v %v", name, a, err)
		}
		if _, err := c.RotateNamespaceKey(ctx, ns, ""); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: rotate after shred: %v", name, err)
		}
		ks, err := c.ListNamespaceKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ks, func(x meta.NamespaceKey) bool { return x.Namespace == ns })
		if i < 0 || !ks[i].Shredded() || ks[i].Generation != 2 || ks[i].KeyARN != "alias/"+ns {
			t.Fatalf("%s: listed %+v", name, ks)
		}
	}
}

package fsm

import (
	"testing"
)

// TestDeleteNamespaceResetsItsKey: a namespace deleted and created again under its name
// starts without a key (the old one's shredded record does not refuse its attach), and a
// key attached then gets a new id, so the old namespace's ns/<id>/ objects are never its.
func TestDeleteNamespaceResetsItsKey(t *testing.T) {
	h := newHarness(t)
	h.apply(t0, CreateNamespace("tenant"))
	old := h.apply(t0+1, AttachNamespaceKey("tenant", testKeyARN))
	if old.Err != nil {
		t.Fatal(old.Err)
	}
	if r := h.apply(t0+2, ShredNamespaceKey("tenant")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.apply(t0+3, DeleteNamespace("tenant")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.apply(t0+4, CreateNamespace("tenant")); r.Err != nil {
		t.Fatal(r.Err)
	}
	ks, err := h.f.ListNamespaceKeys()
	if err != nil || len(ks) != 0 {
		t.Fatalf("the recreated namespace has key records %+v (%v), want none", ks, err)
	}
	r := h.apply(t0+5, AttachNamespaceKey("tenant", "alias/tenant-2"))
	if r.Err != nil || r.NamespaceKey.ID == old.NamespaceKey.ID || r.NamespaceKey.Shredded() || r.NamespaceKey.Generation != 1 {
		t.Fatalf("attach to the recreated namespace: %+v %v, want a fresh key with a new id (old id %d)", r.NamespaceKey, r.Err, old.NamespaceKey.ID)
	}
}

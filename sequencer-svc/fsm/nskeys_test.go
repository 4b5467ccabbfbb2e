package fsm

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

const testKeyARN = "arn:aws:kms:eu-west-1:111122223333:key/0b2f6f7a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"

// Golden files of the namespace key commands and state (testdata/v4/; the nskeys bucket is
// optional, so the format is unchanged), written once with -golden.create when absent and
// never regenerated.
func TestGoldenNamespaceKeyCommands(t *testing.T) {
	at := AttachNamespaceKey("default", testKeyARN)
	at.StampMs = t0 + 1
	ro := RotateNamespaceKey("default", "alias/loam-default-2")
	ro.StampMs = t0 + 2
	sh := ShredNamespaceKey("default")
	sh.StampMs = t0 + 3
	ack := AckNamespaceShred("default", "node-1")
	ack.StampMs = t0 + 4
	for _, c := range []struct {
		path string
		cmd  *metapb.Command
	}{{"testdata/v4/nskey_attach.cmd", at}, {"testdata/v4/nskey_rotate.cmd", ro}, {"testdata/v4/nskey_shred.cmd", sh}, {"testdata/v4/nskey_ack_shred.cmd", ack}} {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		if enc, _ := Encode(c.cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", c.path, enc, b)
		}
		got, err := Decode(b)
		if err != nil || got.String() != c.cmd.String() {
			t.Fatalf("%s: decoded as %v (%v), want %v", c.path, got, err, c.cmd)
		}
	}
}

func TestNamespaceKeys(t *testing.T) {
	h := newHarness(t)
	if ks, err := h.f.ListNamespaceKeys(); err != nil || len(ks) != 0 {
		t.Fatalf("before any key: %v %v", ks, err)
	}
	if r := h.apply(t0, AttachNamespaceKey("nope", testKeyARN)); !errors.Is(r.Err, meta.ErrNamespaceNotFound) {
		t.Fatalf("missing namespace: %v", r.Err)
	}
	if r := h.apply(t0, AttachNamespaceKey("default", "two words")); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("bad arn: %v", r.Err)
	}
	for _, c := range []*metapb.Command{RotateNamespaceKey("default", ""), ShredNamespaceKey("default"), AckNamespaceShred("default", "n1")} {
		if r := h.apply(t0, c); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Fatalf("%v without a key: %v", c, r.Err)
		}
	}
	r := h.apply(t0+1, AttachNamespaceKey("default", testKeyARN))
	want := meta.NamespaceKey{Namespace: "default", ID: 1, KeyARN: testKeyARN, Generation: 1, State: meta.NamespaceKeyActive, UpdatedMs: t0 + 1}
	if r.Err != nil || !equalKey(r.NamespaceKey, want) {
		t.Fatalf("attach: %+v %v", r.NamespaceKey, r.Err)
	}
	if r := h.apply(t0+2, AttachNamespaceKey("default", testKeyARN)); r.Err != nil || !equalKey(r.NamespaceKey, want) {
		t.Fatalf("attach again (a retry): %+v %v", r.NamespaceKey, r.Err)
	}
	if r := h.apply(t0+2, AttachNamespaceKey("default", "alias/other")); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("attach another key: %v", r.Err)
	}
	if r := h.apply(t0+2, AckNamespaceShred("default", "n1")); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("confirm before a shred: %v", r.Err)
	}
	r = h.apply(t0+3, RotateNamespaceKey("default", ""))
	if r.Err != nil || r.NamespaceKey.Generation != 2 || r.NamespaceKey.KeyARN != testKeyARN {
		t.Fatalf("rotate: %+v %v", r.NamespaceKey, r.Err)
	}
	r = h.apply(t0+4, RotateNamespaceKey("default", "alias/loam-2"))
	if r.Err != nil || r.NamespaceKey.Generation != 3 || r.NamespaceKey.KeyARN != "alias/loam-2" || r.NamespaceKey.ID != 1 {
		t.Fatalf("rotate to another key: %+v %v", r.NamespaceKey, r.Err)
	}
	r = h.apply(t0+5, ShredNamespaceKey("default"))
	if r.Err != nil || !r.NamespaceKey.Shredded() || r.NamespaceKey.ShreddedMs != t0+5 {
		t.Fatalf("shred: %+v %v", r.NamespaceKey, r.Err)
	}
	if r := h.apply(t0+6, ShredNamespaceKey("default")); r.Err != nil || r.NamespaceKey.ShreddedMs != t0+5 {
		t.Fatalf("shred again: %+v %v", r.NamespaceKey, r.Err)
	}
	for _, c := range []*metapb.Command{RotateNamespaceKey("default", ""), AttachNamespaceKey("default", "alias/loam-2")} {
		if r := h.apply(t0+6, c); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Fatalf("%v after the shred: %v", c, r.Err)
		}
	}
	for _, n := range []string{"n2", "n1", "n2"} {
		if r := h.apply(t0+7, AckNamespaceShred("default", n)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := h.apply(t0+7, AckNamespaceShred("default", "")); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("empty node: %v", r.Err)
	}
	ks, err := h.f.ListNamespaceKeys()
	if err != nil || len(ks) != 1 || !slices.Equal(ks[0].Dropped, []string{"n1", "n2"}) || ks[0].Generation != 3 {
		t.Fatalf("listed: %+v %v", ks, err)
	}
	// Ids are never reused: a second namespace gets the next.
	h.apply(t0+8, CreateNamespace("tenant-b"))
	if r := h.apply(t0+8, AttachNamespaceKey("tenant-b", testKeyARN)); r.Err != nil || r.NamespaceKey.ID != 2 {
		t.Fatalf("second namespace: %+v %v", r.NamespaceKey, r.Err)
	}
}

func equalKey(a, b meta.NamespaceKey) bool {
	return a.Namespace == b.Namespace && a.ID == b.ID && a.KeyARN == b.KeyARN && a.Generation == b.Generation &&
		a.State == b.State && a.UpdatedMs == b.UpdatedMs && a.ShreddedMs == b.ShreddedMs && slices.Equal(a.Dropped, b.Dropped)
}

// TestGoldenNamespaceKeySnapshot: a snapshot holding namespace keys restores them.
func TestGoldenNamespaceKeySnapshot(t *testing.T) {
	golden(t, "testdata/v4/nskey_state.snap", func() []byte {
		h := newHarness(t)
		h.apply(t0, CreateNamespace("tenant-b"))
		h.apply(t0+1, AttachNamespaceKey("default", testKeyARN))
		h.apply(t0+2, AttachNamespaceKey("tenant-b", "alias/tenant-b"))
		h.apply(t0+3, ShredNamespaceKey("tenant-b"))
		h.apply(t0+4, AckNamespaceShred("tenant-b", "node-1"))
		var buf bytes.Buffer
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Release()
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	})
	f := restoreGolden(t, "testdata/v4/nskey_state.snap")
	ks, err := f.ListNamespaceKeys()
	if err != nil || len(ks) != 2 {
		t.Fatalf("restored: %+v %v", ks, err)
	}
	if !equalKey(ks[0], meta.NamespaceKey{Namespace: "default", ID: 1, KeyARN: testKeyARN, Generation: 1, State: meta.NamespaceKeyActive, UpdatedMs: t0 + 1}) ||
		!equalKey(ks[1], meta.NamespaceKey{Namespace: "tenant-b", ID: 2, KeyARN: "alias/tenant-b", Generation: 1, State: meta.NamespaceKeyShredded,
			UpdatedMs: t0 + 4, ShreddedMs: t0 + 3, Dropped: []string{"node-1"}}) {
		t.Fatalf("restored: %+v", ks)
	}
}

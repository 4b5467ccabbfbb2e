package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// Golden files of ingest quotas (testdata/v4/, the format is unchanged: the quotas bucket
// is optional), written once with -golden.create when absent and never regenerated.

func TestGoldenSetQuotaCommand(t *testing.T) {
	cmd := SetQuota(meta.Quota{Namespace: "default", IngestBytesPerSec: 1 << 20})
	cmd.StampMs = t0 + 5
	b := golden(t, "testdata/v4/set_quota.cmd", func() []byte { b, _ := Encode(cmd); return b })
	got, err := Decode(b)
	if err != nil || got.String() != cmd.String() {
		t.Fatalf("%v: %v", err, got)
	}
	if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, b)
	}
}

func TestSetQuota(t *testing.T) {
	h := newHarness(t)
	if q, err := h.f.GetQuota("default"); err != nil || q.IngestBytesPerSec != 0 {
		t.Fatalf("before any quota: %+v %v", q, err)
	}
	if _, err := h.f.GetQuota("nope"); !errors.Is(err, meta.ErrNamespaceNotFound) {
		t.Fatalf("missing namespace: %v", err)
	}
	if r := h.apply(t0, SetQuota(meta.Quota{Namespace: "nope", IngestBytesPerSec: 5})); !errors.Is(r.Err, meta.ErrNamespaceNotFound) {
		t.Fatalf("set on a missing namespace: %v", r.Err)
	}
	if r := h.apply(t0, SetQuota(meta.Quota{Namespace: "default", IngestBytesPerSec: -5})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("negative rate: %v", r.Err)
	}
	if r := h.apply(t0, SetQuota(meta.Quota{Namespace: "default", IngestBytesPerSec: 5000})); r.Err != nil || r.Quota.IngestBytesPerSec != 5000 {
		t.Fatalf("set: %+v", r)
	}
	if q, err := h.f.GetQuota("default"); err != nil || q.IngestBytesPerSec != 5000 {
		t.Fatalf("after set: %+v %v", q, err)
	}
	if r := h.apply(t0, SetQuota(meta.Quota{Namespace: "default"})); r.Err != nil {
		t.Fatalf("remove: %+v", r)
	}
	if q, _ := h.f.GetQuota("default"); q.IngestBytesPerSec != 0 {
		t.Fatalf("after remove: %+v", q)
	}
}

// TestGoldenQuotaSnapshot: a snapshot holding a quota restores it.
func TestGoldenQuotaSnapshot(t *testing.T) {
	golden(t, "testdata/v4/quota_state.snap", func() []byte {
		h := newHarness(t)
		h.apply(t0, SetQuota(meta.Quota{Namespace: "default", IngestBytesPerSec: 123456}))
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
	f := restoreGolden(t, "testdata/v4/quota_state.snap")
	if q, err := f.GetQuota("default"); err != nil || q.IngestBytesPerSec != 123456 {
		t.Fatalf("restored quota: %+v %v", q, err)
	}
}

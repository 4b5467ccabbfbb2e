package fsm

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loamhq/loam/shared/meta"
)

// TestStreamKeyAttribute: the key attribute is stored at create, read back, replaced and
// cleared by an update, and refused when longer than 255 bytes or not UTF-8 (the stream
// keeps its setting).
func TestStreamKeyAttribute(t *testing.T) {
	h := newHarness(t)
	str := func(v string) *string { return &v }
	r := h.apply(t0, CreateStream(meta.StreamConfig{Name: "logs", Partitions: 2, KeyAttribute: "service.name"}))
	if r.Err != nil || r.Stream.KeyAttribute != "service.name" {
		t.Fatalf("create: %+v", r)
	}
	if s, _, err := h.f.GetStream("default", "logs"); err != nil || s.KeyAttribute != "service.name" {
		t.Fatalf("get: %+v %v", s, err)
	}
	if s := h.stream("plain", 1); s.KeyAttribute != "" {
		t.Fatalf("a stream created without one has key attribute %q", s.KeyAttribute)
	}
	max := strings.Repeat("k", meta.MaxKeyAttributeLength)
	for _, tc := range []struct {
		patch *string
		want  string
	}{
		{nil, "service.name"}, // absent: stays
		{str("host.name"), "host.name"},
		{str("服务.名"), "服务.名"},
		{str(max), max},
		{str(""), ""}, // cleared: keyless
	} {
		r := h.apply(t0, UpdateStream("default", "logs", meta.StreamPatch{KeyAttribute: tc.patch}))
		if r.Err != nil || r.Stream.KeyAttribute != tc.want {
			t.Fatalf("patch %v: %+v, want %q", tc.patch, r, tc.want)
		}
		if s, _, _ := h.f.GetStream("default", "logs"); s.KeyAttribute != tc.want {
			t.Fatalf("patch %v: stored %q, want %q", tc.patch, s.KeyAttribute, tc.want)
		}
	}
	h.apply(t0, UpdateStream("default", "logs", meta.StreamPatch{KeyAttribute: str("service.name")}))
	for _, bad := range []string{max + "k", "svc\xff"} {
		// Proto strings cannot carry invalid UTF-8, so the leader's checks refuse it
		// before a command is encoded; the state machine runs the same checks.
		if _, err := NormalizeConfig(meta.StreamConfig{Name: "bad", Partitions: 1, KeyAttribute: bad}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("normalize with %d bytes: %v, want ErrInvalidArgument", len(bad), err)
		}
		if _, err := ApplyPatch(meta.StreamConfig{}, meta.StreamPatch{KeyAttribute: &bad}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("patch with %d bytes: %v, want ErrInvalidArgument", len(bad), err)
		}
		if !utf8.ValidString(bad) {
			continue
		}
		if r := h.apply(t0, CreateStream(meta.StreamConfig{Name: "bad", Partitions: 1, KeyAttribute: bad})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Errorf("create with %d bytes: %v, want ErrInvalidArgument", len(bad), r.Err)
		}
		if r := h.apply(t0, UpdateStream("default", "logs", meta.StreamPatch{KeyAttribute: &bad})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Errorf("update with %d bytes: %v, want ErrInvalidArgument", len(bad), r.Err)
		}
	}
	if s, _, _ := h.f.GetStream("default", "logs"); s.KeyAttribute != "service.name" {
		t.Fatalf("a refused update changed the key attribute to %q", s.KeyAttribute)
	}
	if _, _, err := h.f.GetStream("default", "bad"); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("a refused create made the stream: %v", err)
	}
}

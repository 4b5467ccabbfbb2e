package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// TestGoldenMaxMessageBytes: a stream's max_message_bytes is a field of the create and
// update commands whose bytes are fixed (testdata/v4/create_stream_max_message.cmd,
// update_stream_max_message.cmd) and survives a round trip.
func TestGoldenMaxMessageBytes(t *testing.T) {
	mm := int32(51200)
	for path, cmd := range map[string]*metapb.Command{
		"testdata/v4/create_stream_max_message.cmd": CreateStream(meta.StreamConfig{Namespace: meta.DefaultNS, Name: "big", Partitions: 2, MaxMessageBytes: 3 << 20}),
		"testdata/v4/update_stream_max_message.cmd": UpdateStream(meta.DefaultNS, "big", meta.StreamPatch{MaxMessageBytes: &mm}),
	} {
		cmd.StampMs = t0 + 5
		b := golden(t, path, func() []byte { b, _ := Encode(cmd); return b })
		got, err := Decode(b)
		if err != nil || got.String() != cmd.String() {
			t.Fatalf("%s: %v: %v", path, err, got)
		}
		if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", path, enc, b)
		}
	}
}

// TestMaxMessageBytesBounds: the state machine keeps max_message_bytes of 0 (the node's
// limit) or 1..MaxMessageBytesLimit, and refuses others, on create and on update.
func TestMaxMessageBytesBounds(t *testing.T) {
	h := newHarness(t)
	st := h.apply(t0, CreateStream(meta.StreamConfig{Name: "s", Partitions: 1, MaxMessageBytes: 1000}))
	if st.Err != nil || st.Stream.MaxMessageBytes != 1000 {
		t.Fatalf("create: %v %d", st.Err, st.Stream.MaxMessageBytes)
	}
	for _, bad := range []int32{-1, meta.MaxMessageBytesLimit + 1} {
		if r := h.apply(t0, CreateStream(meta.StreamConfig{Name: "bad", Partitions: 1, MaxMessageBytes: bad})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Fatalf("create with %d: %v", bad, r.Err)
		}
		b := bad
		if r := h.apply(t0, UpdateStream(meta.DefaultNS, "s", meta.StreamPatch{MaxMessageBytes: &b})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Fatalf("update to %d: %v", bad, r.Err)
		}
	}
	zero := int32(0)
	if r := h.apply(t0, UpdateStream(meta.DefaultNS, "s", meta.StreamPatch{MaxMessageBytes: &zero})); r.Err != nil || r.Stream.MaxMessageBytes != 0 {
		t.Fatalf("reset: %v %d", r.Err, r.Stream.MaxMessageBytes)
	}
}

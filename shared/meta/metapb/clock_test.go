package metapb

import (
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestClockGolden pins the wire bytes of the clock report messages (field numbers and
// types are the protocol between voters of different versions) and round-trips them.
func TestClockGolden(t *testing.T) {
	for _, c := range []struct {
		msg  proto.Message
		want string
	}{
		// id "seq-2" (field 1, bytes), wall_us 1764580000123456 (field 2, varint)
		{&ClockReport{Id: "seq-2", WallUs: 1764580000123456}, "0a057365712d3210c094d7e0849c9103"},
		// wall_us 1764580000123456 (field 1), leader true (field 2)
		{&ClockReply{WallUs: 1764580000123456, Leader: true}, "08c094d7e0849c91031001"},
		{&ClockReport{}, ""},
	} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%T %v: %s, want %s", c.msg, c.msg, got, c.want)
		}
		back := c.msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, back); err != nil || !proto.Equal(back, c.msg) {
			t.Errorf("%T round trip: %v %v", c.msg, back, err)
		}
	}
}

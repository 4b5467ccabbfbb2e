package fsm

import (
	"bytes"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Golden files of the consumer delete and reset commands (testdata/v4/), written once with
// -golden.create when absent and never regenerated.

func TestGoldenConsumerAdminCommands(t *testing.T) {
	del := DeleteConsumer("default", "billing", true)
	del.StampMs = t0 + 7
	rs := ResetConsumerOffsets(meta.ConsumerReset{Namespace: "default", Consumer: "billing", Stream: "orders", Partitions: []int32{0, 2},
		To: meta.ResetTimestamp, TimestampMs: t0 - 60_000, Force: true}, []meta.ConsumerOffset{{Partition: 0, Offset: 120}, {Partition: 2, Offset: 0}})
	rs.StampMs = t0 + 8
	for _, c := range []struct {
		path string
		cmd  *metapb.Command
	}{{"testdata/v4/consumer_delete.cmd", del}, {"testdata/v4/consumer_reset.cmd", rs}} {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		if enc, _ := Encode(c.cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", c.path, enc, b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStampMs() != c.cmd.GetStampMs() || got.GetConsumer().String() != c.cmd.GetConsumer().String() {
			t.Fatalf("%s: decoded as %v, want %v", c.path, got, c.cmd)
		}
	}
}

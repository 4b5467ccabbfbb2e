package metapb

import (
	"encoding/hex"
	"math"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"google.golang.org/protobuf/proto"
)

// TestProducerWire: golden bytes of the RPC messages idempotent producers added or
// extended, and the round trip of their Go types.
func TestProducerWire(t *testing.T) {
	cw := meta.CommitWal{NodeID: "n", Object: "o", Class: "standard", CreatedMs: 1, StampMs: 2, Chunks: []meta.Chunk{
		{StreamID: 1, Partition: 2, Records: 3, Offset: 4, Length: 5, MaxTimestamp: 6,
			Producer: meta.ChunkProducer{ID: 7, Epoch: math.MaxInt16, BaseSequence: math.MaxInt32}},
		{StreamID: 1, Partition: 3, Records: 1, Offset: 9, Length: 1},
	}}
	for _, c := range []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"CommitWalRequest", FromCommitWal(cw), "0a016e12016f1a087374616e64617264200128023218080110021803200428053006380740ffff0148ffffffff07320a080110031801200928013801"},
		{"InitProducerRequest", &InitProducerRequest{Namespace: "default", Name: "billing", ProducerId: 7, Epoch: 3}, "0a0764656661756c74120762696c6c696e67180720" + "03"},
		{"InitProducerResponse", &InitProducerResponse{ProducerId: 7, Epoch: 32767}, "080710ffff01"},
	} {
		b, err := proto.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	back := ToCommitWal(FromCommitWal(cw))
	if !reflect.DeepEqual(back, cw) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, cw)
	}
	// An epoch out of int16's range on the wire is no epoch, which the sequencer refuses.
	if ch := ToChunks([]*Chunk{{ProducerId: 1, ProducerEpoch: 1 << 16}}); ch[0].Producer.Epoch != -1 {
		t.Fatalf("%+v", ch[0].Producer)
	}
}

package kafka_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/node"
)

// TestPipelinedProduce: five idempotent produce requests sent back to back on one
// connection, without waiting for answers, are buffered in order and committed together:
// each answers success at the next offsets, the answers come in request order, and all
// five take about one flush interval, not five.
func TestPipelinedProduce(t *testing.T) {
	const flush = 300 * time.Millisecond
	e := start(t, func(c *node.Config) { c.FlushInterval = flush })
	e.createTopic(t, "pipe", 1)
	cl := e.client(t)
	ip := raw[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	c, err := net.Dial("tcp", e.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipe"))
	t0 := time.Now()
	for i := range 5 {
		req := produceReq("pipe", 0, batch(t, 2, ip.ProducerID, ip.ProducerEpoch, int32(2*i)))
		req.Version = 9
		if _, err := c.Write(f.AppendRequest(nil, req, int32(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 5 {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != int32(100+i) {
			t.Fatalf("answer %d carries correlation id %d, want %d (request order)", i, corr, 100+i)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[5:]); err != nil { // id, then the flexible header's empty tags
			t.Fatal(err)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || rp.BaseOffset != int64(2*i) {
			t.Fatalf("request %d: %v at offset %d, want success at %d", i, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset, 2*i)
		}
	}
	if d := time.Since(t0); d > 3*flush {
		t.Fatalf("five pipelined produces took %v: more than 3 flush intervals (%v), so they were served one at a time", d, flush)
	}
}

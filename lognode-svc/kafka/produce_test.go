package kafka_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
)

// TestProduceBadInput: batches with a bad CRC, a bad magic, a compressed payload that lies
// about its size, a batch over the record limit, a control batch, a transactional
// produce and an unknown partition are each refused with the Kafka error code, and the
// partition's high watermark does not move.
func TestProduceBadInput(t *testing.T) {
	e := start(t, func(c *node.Config) { c.Limits = httpapi.Limits{MaxRecordBytes: 64 << 10} })
	e.createTopic(t, "bad", 2)
	cl := e.client(t)
	good := batch(t, 3, 0, 0, 0)

	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	badMagic := bytes.Clone(good)
	badMagic[16] = 1
	// A zstd payload that decompresses far past its batch: 80 MiB of zeros in a few KiB.
	bomb := zstdBatch(t, make([]byte, 80<<20))
	big := bytes.Repeat([]byte{1}, 100<<10)
	tooLarge := bigBatch(t, big)
	control := bytes.Clone(good)
	binary.BigEndian.PutUint16(control[21:], binary.BigEndian.Uint16(control[21:])|0x20)
	fixCRC(control)

	for _, tc := range []struct {
		name    string
		p       int32
		records []byte
		want    int16
	}{
		{"bad crc", 0, badCRC, kerr.CorruptMessage.Code},
		{"bad magic", 0, badMagic, kerr.CorruptMessage.Code},
		{"truncated", 0, good[:len(good)-3], kerr.CorruptMessage.Code},
		{"compressed payload lying about its size", 0, bomb, kerr.CorruptMessage.Code},
		{"over the record limit", 0, tooLarge, kerr.MessageTooLarge.Code},
		{"control batch", 0, control, kerr.InvalidRecord.Code},
		{"unknown partition", 7, good, kerr.UnknownTopicOrPartition.Code},
	} {
		code, _ := produceOne(t, cl, "bad", tc.p, tc.records)
		if code != tc.want {
			t.Errorf("%s: code %v, want %v", tc.name, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
	}
	req := produceReq("bad", 0, good)
	txn := "txn"
	req.TransactionID = &txn
	if c := raw[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional produce: %v", kerr.ErrorForCode(c))
	}
	if code, _ := produceOne(t, cl, "missing", 0, good); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing topic: %v", kerr.ErrorForCode(code))
	}
	if h := e.hwm(t, "bad", 0); h != 0 {
		t.Fatalf("high watermark %d after refused batches, want 0", h)
	}
	if code, off := produceOne(t, cl, "bad", 0, good); code != 0 || off != 0 {
		t.Fatalf("good batch after the refusals: code %v offset %d", kerr.ErrorForCode(code), off)
	}
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

// zstdBatch wraps value as one record's value in a zstd batch.
func zstdBatch(t testing.TB, value []byte) []byte {
	t.Helper()
	// One record: attributes, timestampDelta, offsetDelta, key -1, value, headers 0.
	rec := []byte{0, 0, 0, 1}
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = append(rec, 0)
	body := binary.AppendVarint(nil, int64(len(rec)))
	body = append(body, rec...)
	enc, _ := zstd.NewWriter(nil)
	comp := enc.EncodeAll(body, nil)
	return rawBatch(comp, 4, 1)
}

// bigBatch is an uncompressed batch of one record with value v.
func bigBatch(t testing.TB, v []byte) []byte {
	rec := []byte{0, 0, 0, 1}
	rec = binary.AppendVarint(rec, int64(len(v)))
	rec = append(rec, v...)
	rec = append(rec, 0)
	body := binary.AppendVarint(nil, int64(len(rec)))
	body = append(body, rec...)
	return rawBatch(body, 0, 1)
}

func rawBatch(records []byte, codec int16, n int32) []byte {
	b := make([]byte, 61, 61+len(records))
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(records)))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint64(b[27:], 1732870000000)
	binary.BigEndian.PutUint64(b[35:], 1732870000000)
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	b = append(b, records...)
	fixCRC(b)
	return b
}

// TestIdempotentProduce: InitProducerId allocates a native producer; a retry of a batch
// answers success with the original offset and writes nothing; a gap answers
// OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch INVALID_PRODUCER_EPOCH; an unknown
// producer UNKNOWN_PRODUCER_ID.
func TestIdempotentProduce(t *testing.T) {
	e := start(t)
	e.createTopic(t, "idem", 1)
	cl := e.client(t)
	ip := raw[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	if ip.ErrorCode != 0 || ip.ProducerID <= 0 {
		t.Fatalf("InitProducerId: %v id %d", kerr.ErrorForCode(ip.ErrorCode), ip.ProducerID)
	}
	pid, ep := ip.ProducerID, ip.ProducerEpoch
	if c, off := produceOne(t, cl, "idem", 0, batch(t, 3, pid, ep, 0)); c != 0 || off != 0 {
		t.Fatalf("first batch: %v at %d", kerr.ErrorForCode(c), off)
	}
	if c, off := produceOne(t, cl, "idem", 0, batch(t, 2, pid, ep, 3)); c != 0 || off != 3 {
		t.Fatalf("second batch: %v at %d", kerr.ErrorForCode(c), off)
	}
	if c, off := produceOne(t, cl, "idem", 0, batch(t, 3, pid, ep, 0)); c != 0 || off != 0 {
		t.Fatalf("retry of the first batch: %v at %d, want success at 0", kerr.ErrorForCode(c), off)
	}
	if h := e.hwm(t, "idem", 0); h != 5 {
		t.Fatalf("high watermark %d after a duplicate, want 5", h)
	}
	if c, _ := produceOne(t, cl, "idem", 0, batch(t, 1, pid, ep, 9)); c != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %v", kerr.ErrorForCode(c))
	}
	bump := kmsg.NewPtrInitProducerIDRequest()
	bump.ProducerID, bump.ProducerEpoch = pid, ep
	ip2 := raw[*kmsg.InitProducerIDResponse](t, cl, bump)
	if ip2.ErrorCode != 0 || ip2.ProducerID != pid || ip2.ProducerEpoch != ep+1 {
		t.Fatalf("epoch bump: %v id %d epoch %d", kerr.ErrorForCode(ip2.ErrorCode), ip2.ProducerID, ip2.ProducerEpoch)
	}
	if c, _ := produceOne(t, cl, "idem", 0, batch(t, 1, pid, ep, 5)); c != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %v", kerr.ErrorForCode(c))
	}
	if c, _ := produceOne(t, cl, "idem", 0, batch(t, 1, pid+1000, 0, 0)); c != kerr.UnknownProducerID.Code {
		t.Fatalf("unknown producer: %v", kerr.ErrorForCode(c))
	}
	if h := e.hwm(t, "idem", 0); h != 5 {
		t.Fatalf("high watermark %d after refusals, want 5", h)
	}
}

// TestAcksZero: acks=0 answers nothing and still commits; the next request on the same
// connection is answered.
func TestAcksZero(t *testing.T) {
	e := start(t)
	e.createTopic(t, "fire", 1)
	p := e.client(t, kgo.DefaultProduceTopic("fire"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	for range 10 {
		if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.hwm(t, "fire", 0) != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("high watermark %d, want 10", e.hwm(t, "fire", 0))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.Request(ctx(t), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
}

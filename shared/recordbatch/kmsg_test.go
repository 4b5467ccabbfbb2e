package recordbatch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cross-checks against franz-go: kmsg's generated wire structs and kgo's own
// compressors and decompressors are an independent implementation of the format.

var kgoCodecs = map[Compression]kgo.CompressionCodec{
	Gzip:   kgo.GzipCompression(),
	Snappy: kgo.SnappyCompression(), // kgo writes a raw snappy block
	LZ4:    kgo.Lz4Compression(),
	Zstd:   kgo.ZstdCompression(),
}

func crossRecords() []Record {
	recs := textRecords(50, 300, 42)
	recs[3].Key = nil
	recs[4].Value = nil
	recs[5].Headers = append(recs[5].Headers, Header{Key: "null"}, Header{Key: "empty", Value: []byte{}})
	recs[6].Timestamp -= 1000 // negative delta
	return recs
}

// kmsgBatch builds a batch the way franz-go's producer does: kmsg.Record and
// kmsg.RecordBatch append the fields, kgo's compressor compresses, CRC32C by hand.
func kmsgBatch(t *testing.T, recs []Record, c Compression) []byte {
	t.Helper()
	var section []byte
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.Timestamp - recs[0].Timestamp,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		body := kr.AppendTo(nil) // with Length 0, which takes one byte
		kr.Length = int32(len(body) - 1)
		section = kr.AppendTo(section)
	}
	payload := section
	if c != None {
		comp, err := kgo.DefaultCompressor(kgoCodecs[c])
		if err != nil {
			t.Fatal(err)
		}
		out, used := comp.Compress(new(bytes.Buffer), section)
		if used != kgo.CompressionCodecType(c) {
			t.Fatalf("kgo compressed with %d, want %d", used, c)
		}
		payload = append([]byte(nil), out...)
	}
	maxTS := recs[0].Timestamp
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          900,
		Length:               int32(49 + len(payload)),
		PartitionLeaderEpoch: 4,
		Magic:                2,
		Attributes:           int16(c),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       recs[0].Timestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           12,
		ProducerEpoch:        1,
		FirstSequence:        100,
		NumRecords:           int32(len(recs)),
		Records:              payload,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func TestKmsgBuiltBatchesParse(t *testing.T) {
	recs := crossRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			raw := kmsgBatch(t, recs, c)
			bs, err := Validate(raw)
			if err != nil {
				t.Fatal(err)
			}
			b := bs[0]
			if b.BaseOffset != 900 || b.PartitionLeaderEpoch != 4 || b.ProducerID != 12 || b.ProducerEpoch != 1 ||
				b.BaseSequence != 100 || b.NumRecords != int32(len(recs)) || b.Compression() != c {
				t.Fatalf("header %+v", b)
			}
			got, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			if d := diffRecords(withDeltas(recs), got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestOurBatchesReadByKmsg(t *testing.T) {
	recs := crossRecords()
	dec := kgo.DefaultDecompressor()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			opt := BuildOptions{BaseOffset: 77, Compression: c, ProducerID: 5, ProducerEpoch: 6, BaseSequence: 7}
			raw := mustAppend(t, nil, recs, opt)
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(raw); err != nil {
				t.Fatalf("kmsg: %v", err)
			}
			if rb.FirstOffset != 77 || rb.Magic != 2 || int(rb.Length) != len(raw)-12 || rb.NumRecords != int32(len(recs)) ||
				rb.ProducerID != 5 || rb.ProducerEpoch != 6 || rb.FirstSequence != 7 || rb.LastOffsetDelta != int32(len(recs)-1) {
				t.Fatalf("kmsg header %+v", rb)
			}
			if sum := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != sum {
				t.Fatalf("crc %08x, computed %08x", uint32(rb.CRC), sum)
			}
			section, err := dec.Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
			if err != nil {
				t.Fatalf("kgo decompress: %v", err)
			}
			for i := range recs {
				n, ln := binary.Varint(section)
				if ln <= 0 || int(n)+ln > len(section) {
					t.Fatalf("record %d: bad length", i)
				}
				var kr kmsg.Record
				if err := kr.ReadFrom(section[:ln+int(n)]); err != nil {
					t.Fatalf("record %d: kmsg: %v", i, err)
				}
				section = section[ln+int(n):]
				got := Record{OffsetDelta: kr.OffsetDelta, Timestamp: rb.FirstTimestamp + kr.TimestampDelta64, Key: kr.Key, Value: kr.Value}
				for _, h := range kr.Headers {
					got.Headers = append(got.Headers, Header{Key: h.Key, Value: h.Value})
				}
				if d := diffRecords(withDeltas(recs)[i:i+1], []Record{got}); d != "" {
					t.Fatalf("record %d: %s", i, d)
				}
			}
			if len(section) != 0 {
				t.Fatalf("%d bytes after the last record", len(section))
			}
		})
	}
}

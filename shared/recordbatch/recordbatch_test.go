package recordbatch

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) // 200 KiB: several lz4, xerial and zstd blocks
	sets := []struct {
		name     string
		recs     []Record
		validate bool // deltas are 0..n-1, so Validate (produce rules) accepts it
	}{
		{"one", []Record{{Timestamp: 1, Key: []byte("k"), Value: []byte("v")}}, true},
		{"nulls and empties", []Record{
			{Timestamp: 5},
			{Timestamp: 5, Key: []byte{}, Value: []byte{}},
			{Timestamp: 5, Key: nil, Value: []byte("x")},
			{Timestamp: 5, Key: []byte("x"), Value: nil},
		}, true},
		{"headers", []Record{
			{Timestamp: 9, Value: []byte("v"), Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}}},
			{Timestamp: 9, Headers: []Header{{Key: strings.Repeat("h", 300), Value: bytes.Repeat([]byte{0xff}, 300)}}},
		}, true},
		{"timestamps", []Record{
			{Timestamp: 1_700_000_000_000},
			{Timestamp: 1_600_000_000_000}, // earlier than the first: negative delta
			{Timestamp: -1},
			{Timestamp: math.MaxInt64},
			{Timestamp: math.MinInt64},
		}, true},
		{"explicit consecutive deltas", []Record{{OffsetDelta: 0}, {OffsetDelta: 1}, {OffsetDelta: 2}}, true},
		{"explicit deltas with gaps", []Record{{OffsetDelta: 0, Value: []byte("a")}, {OffsetDelta: 3}, {OffsetDelta: 70000}}, false},
		{"deltas not from zero", []Record{{OffsetDelta: 2}, {OffsetDelta: 5}}, false},
		{"many", textRecords(1000, 100, 1), true},
		{"large value", []Record{{Timestamp: 3, Key: []byte("big"), Value: big}, {Timestamp: 4, Value: big[:70000]}}, true},
	}
	for _, set := range sets {
		for _, c := range allCodecs {
			t.Run(set.name+"/"+c.String(), func(t *testing.T) {
				opt := BuildOptions{BaseOffset: 1234, Compression: c, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 19}
				prefix := []byte("prefix")
				raw := mustAppend(t, append([]byte(nil), prefix...), set.recs, opt)
				if !bytes.Equal(raw[:len(prefix)], prefix) {
					t.Fatalf("Append changed the bytes before dst's length")
				}
				b, rest, err := Parse(raw[len(prefix):])
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if len(rest) != 0 {
					t.Fatalf("Parse left %d bytes", len(rest))
				}
				want := withDeltas(set.recs)
				maxTS := set.recs[0].Timestamp
				for _, r := range set.recs {
					maxTS = max(maxTS, r.Timestamp)
				}
				checks := []struct {
					name      string
					got, want int64
				}{
					{"BaseOffset", b.BaseOffset, 1234},
					{"BatchLength", int64(b.BatchLength), int64(len(b.Raw) - 12)},
					{"PartitionLeaderEpoch", int64(b.PartitionLeaderEpoch), -1},
					{"Magic", int64(b.Magic), 2},
					{"Compression", int64(b.Compression()), int64(c)},
					{"LastOffsetDelta", int64(b.LastOffsetDelta), int64(want[len(want)-1].OffsetDelta)},
					{"FirstTimestamp", b.FirstTimestamp, set.recs[0].Timestamp},
					{"MaxTimestamp", b.MaxTimestamp, maxTS},
					{"ProducerID", b.ProducerID, 77},
					{"ProducerEpoch", int64(b.ProducerEpoch), 3},
					{"BaseSequence", int64(b.BaseSequence), 19},
					{"NumRecords", int64(b.NumRecords), int64(len(set.recs))},
					{"OffsetCount", b.OffsetCount(), int64(want[len(want)-1].OffsetDelta) + 1},
					{"LastOffset", b.LastOffset(), 1234 + int64(want[len(want)-1].OffsetDelta)},
				}
				for _, ck := range checks {
					if ck.got != ck.want {
						t.Errorf("%s = %d, want %d", ck.name, ck.got, ck.want)
					}
				}
				if b.Transactional() || b.Control() || b.LogAppendTime() {
					t.Errorf("attributes 0x%x: unexpected flag bits", b.Attributes)
				}
				got, err := b.Records()
				if err != nil {
					t.Fatalf("Records: %v", err)
				}
				if d := diffRecords(want, got); d != "" {
					t.Fatal(d)
				}
				bs, err := Validate(raw[len(prefix):])
				if set.validate {
					if err != nil {
						t.Fatalf("Validate: %v", err)
					}
					if len(bs) != 1 || !bytes.Equal(bs[0].Raw, b.Raw) {
						t.Fatalf("Validate returned %d batches", len(bs))
					}
				} else if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Validate of a gapped batch: %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

func TestRecordsAliasUncompressedInput(t *testing.T) {
	raw := mustAppend(t, nil, []Record{{Value: []byte("hello")}}, DefaultBuildOptions())
	b, _, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte("hello"))
	raw[i] = 'j'
	if string(recs[0].Value) != "jello" {
		t.Fatalf("value %q does not alias the batch", recs[0].Value)
	}
	if cap(recs[0].Value) != len(recs[0].Value) {
		t.Fatalf("value has spare capacity %d: appending to it would clobber the batch", cap(recs[0].Value))
	}
}

func TestDefaultBuildOptions(t *testing.T) {
	raw := mustAppend(t, nil, []Record{{}}, DefaultBuildOptions())
	b, _, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if b.BaseOffset != 0 || b.ProducerID != -1 || b.ProducerEpoch != -1 || b.BaseSequence != -1 || b.Compression() != None {
		t.Fatalf("default options wrote %+v", b)
	}
	raw = mustAppend(t, nil, []Record{{}}, BuildOptions{})
	b, _, _ = Parse(raw)
	if b.ProducerID != 0 || b.ProducerEpoch != 0 || b.BaseSequence != 0 {
		t.Fatalf("zero options wrote producer %d/%d/%d, want 0/0/0", b.ProducerID, b.ProducerEpoch, b.BaseSequence)
	}
}

func TestAppendErrors(t *testing.T) {
	cases := []struct {
		name string
		recs []Record
		opt  BuildOptions
		want error
	}{
		{"no records", nil, DefaultBuildOptions(), ErrBadRecords},
		{"decreasing deltas", []Record{{OffsetDelta: 2}, {OffsetDelta: 1}}, DefaultBuildOptions(), ErrBadRecords},
		{"repeated delta", []Record{{OffsetDelta: 1}, {OffsetDelta: 1}}, DefaultBuildOptions(), ErrBadRecords},
		{"negative delta", []Record{{OffsetDelta: -1}, {OffsetDelta: 0}}, DefaultBuildOptions(), ErrBadRecords},
		{"zero after set", []Record{{OffsetDelta: 0}, {OffsetDelta: 4}, {OffsetDelta: 0}}, DefaultBuildOptions(), ErrBadRecords},
		{"codec 5", []Record{{}}, BuildOptions{Compression: 5}, ErrUnsupportedCompression},
		{"codec -1", []Record{{}}, BuildOptions{Compression: -1}, ErrUnsupportedCompression},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := Append(dst, tc.recs, tc.opt)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if string(out) != "keep" {
				t.Fatalf("dst became %q", out)
			}
		})
	}
}

func TestAppendRefusesOverDecompressionLimit(t *testing.T) {
	huge := make([]byte, DefaultMaxDecompressed)
	_, err := Append(nil, []Record{{Value: huge}}, withCodec(Zstd))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("zstd batch over the limit: %v, want ErrTooLarge", err)
	}
}

func TestConcatenation(t *testing.T) {
	var raw []byte
	for i, c := range allCodecs {
		opt := withCodec(c)
		opt.BaseOffset = int64(i * 100)
		raw = mustAppend(t, raw, textRecords(i+1, 50, uint64(i)), opt)
	}
	bs, err := Validate(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != len(allCodecs) {
		t.Fatalf("%d batches, want %d", len(bs), len(allCodecs))
	}
	total := 0
	for i, b := range bs {
		if b.BaseOffset != int64(i*100) || b.Compression() != allCodecs[i] || b.NumRecords != int32(i+1) {
			t.Errorf("batch %d: base %d codec %s records %d", i, b.BaseOffset, b.Compression(), b.NumRecords)
		}
		total += len(b.Raw)
	}
	if total != len(raw) {
		t.Fatalf("batches cover %d of %d bytes", total, len(raw))
	}
	// Trailing garbage after the last batch is refused.
	for _, tail := range [][]byte{{0}, bytes.Repeat([]byte{0}, 12), []byte("garbage garbage garbage")} {
		if _, err := Validate(append(append([]byte(nil), raw...), tail...)); err == nil {
			t.Errorf("Validate accepted %d trailing bytes", len(tail))
		}
	}
	if _, err := Validate(nil); !errors.Is(err, ErrTruncated) {
		t.Errorf("Validate(nil): %v, want ErrTruncated", err)
	}
}

func TestParseErrors(t *testing.T) {
	good := mustAppend(t, nil, []Record{{Value: []byte("v")}}, DefaultBuildOptions())
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrTruncated, "need 12"},
		{"11 bytes", good[:11], ErrTruncated, "need 12"},
		{"header only", good[:61], ErrTruncated, "batchLength"},
		{"one short", good[:len(good)-1], ErrTruncated, "batchLength"},
		{"magic 1", mod(func(b []byte) []byte { b[16] = 1; return b }), ErrBadMagic, "magic 1"},
		{"magic 0 short", mod(func(b []byte) []byte { b[16] = 0; return b[:20] }), ErrBadMagic, "magic 0"},
		{"length 48", mod(func(b []byte) []byte { b[11] = 48; return b }), ErrCorrupt, "batchLength 48"},
		{"length negative", mod(func(b []byte) []byte { b[8] = 0x80; return b }), ErrCorrupt, "batchLength -2147483"},
		{"length too big", mod(func(b []byte) []byte { b[10]++; return b }), ErrTruncated, "batchLength"},
		{"crc", mod(func(b []byte) []byte { b[17] ^= 1; return b }), ErrBadCRC, "crc"},
		{"attributes", mod(func(b []byte) []byte { b[22] ^= 0x10; return b }), ErrBadCRC, "crc"},
		{"value", mod(func(b []byte) []byte { b[len(b)-2] ^= 0xff; return b }), ErrBadCRC, "crc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rest, err := Parse(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %q does not name %q", err, tc.msg)
			}
			if len(rest) != len(tc.in) {
				t.Fatalf("rest is %d bytes, want the whole input %d", len(rest), len(tc.in))
			}
			if _, err := Validate(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("Validate: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestTruncationEveryLength cuts two concatenated batches of every codec at every
// length: a cut inside a batch is ErrTruncated, a cut between batches parses whole.
func TestTruncationEveryLength(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			first := mustAppend(t, nil, textRecords(3, 40, 7), withCodec(c))
			both := mustAppend(t, append([]byte(nil), first...), textRecords(2, 30, 8), withCodec(c))
			for n := 0; n <= len(both); n++ {
				bs, err := Validate(both[:n])
				switch n {
				case len(first), len(both):
					want := 1
					if n == len(both) {
						want = 2
					}
					if err != nil || len(bs) != want {
						t.Fatalf("cut at %d: %d batches, %v", n, len(bs), err)
					}
				default:
					if !errors.Is(err, ErrTruncated) {
						t.Fatalf("cut at %d of %d: %v, want ErrTruncated", n, len(both), err)
					}
				}
				if n < len(first) {
					if _, _, err := Parse(both[:n]); !errors.Is(err, ErrTruncated) {
						t.Fatalf("Parse cut at %d: %v, want ErrTruncated", n, err)
					}
				}
			}
		})
	}
}

// TestCRCCorruption flips every bit from attributes to the end, and every bit of the
// CRC itself: each flip is ErrBadCRC. Flips before byte 16 are outside the CRC.
func TestCRCCorruption(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			raw := mustAppend(t, nil, textRecords(4, 20, 3), withCodec(c))
			for i := 17; i < len(raw); i++ {
				for bit := range 8 {
					raw[i] ^= 1 << bit
					_, _, err := Parse(raw)
					raw[i] ^= 1 << bit
					if !errors.Is(err, ErrBadCRC) {
						t.Fatalf("flip byte %d bit %d: %v, want ErrBadCRC", i, bit, err)
					}
				}
			}
			// baseOffset and partitionLeaderEpoch are outside the CRC.
			for _, i := range []int{0, 7, 12, 15} {
				raw[i] ^= 0x40
				b, _, err := Parse(raw)
				raw[i] ^= 0x40
				if err != nil {
					t.Fatalf("flip byte %d (outside the CRC): %v", i, err)
				}
				if _, err := b.Records(); err != nil {
					t.Fatalf("flip byte %d: Records: %v", i, err)
				}
			}
		})
	}
}

func TestSetBaseOffset(t *testing.T) {
	raw := mustAppend(t, nil, textRecords(5, 10, 1), withCodec(Zstd))
	before, _, _ := Parse(raw)
	for _, off := range []int64{0, 1, 1 << 40, math.MaxInt64, -1} {
		if err := SetBaseOffset(raw, off); err != nil {
			t.Fatal(err)
		}
		b, _, err := Parse(raw)
		if err != nil {
			t.Fatalf("after SetBaseOffset(%d): %v", off, err)
		}
		if b.BaseOffset != off || b.CRC != before.CRC || !bytes.Equal(b.Raw[8:], before.Raw[8:]) {
			t.Fatalf("SetBaseOffset(%d): base %d crc %08x, other bytes changed: %v", off, b.BaseOffset, b.CRC, !bytes.Equal(b.Raw[8:], before.Raw[8:]))
		}
	}
	if err := SetBaseOffset(raw[:60], 1); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short: %v", err)
	}
	raw[16] = 1
	if err := SetBaseOffset(raw, 1); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("magic 1: %v", err)
	}
}

// TestCorruptRecords feeds hand-built records sections with valid batch headers and
// CRCs: every flaw is ErrCorrupt from Records and from Validate, naming the record.
func TestCorruptRecords(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name      string
		n         int32
		lastDelta int32
		payload   []byte
		msg       string
	}{
		{"fewer records than numRecords", 2, 1, simpleRec(0), "holds 1 records, numRecords says 2"},
		{"trailing bytes after records", 1, 0, cat(simpleRec(0), []byte{0}), "trailing bytes"},
		{"length varint runs off the end", 1, 0, []byte{0x80}, "length varint"},
		{"length varint overflows", 1, 0, bytes.Repeat([]byte{0xff}, 11), "length varint"},
		{"length past the end", 1, 0, cat(simpleRec(0)[:1], simpleRec(0)[1:5]), "length 8"},
		{"length negative", 1, 0, cat([]byte{0x01}, simpleRec(0)[1:]), "length -1"},
		{"length below minimum", 1, 0, recBytes(byte(0), 0, 0, 1), "length 4"},
		{"key length -2", 1, 0, recBytes(byte(0), 0, 0, -2, 1, "v", 0), "key length -2"},
		{"key past record", 1, 0, recBytes(byte(0), 0, 0, 50, 0, 0), "key length 50"},
		{"value past record", 1, 0, recBytes(byte(0), 0, 0, -1, 9, "abc", 0), "value length 9"},
		{"offsetDelta overflows int32", 1, 0, recBytes(byte(0), 0, 1<<40, -1, -1, 0), "overflows 32 bits"},
		{"timestampDelta truncated", 1, 0, recBytes(byte(0), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80}), "timestampDelta varint"},
		{"header count negative", 1, 0, recBytes(byte(0), 0, 0, -1, -1, -1), "header count -1"},
		{"header count too large", 1, 0, recBytes(byte(0), 0, 0, -1, -1, 1000, 0, -1), "header count 1000"},
		{"header key null", 1, 0, recBytes(byte(0), 0, 0, -1, -1, 1, -1, -1), "key at byte"},
		{"header value past record", 1, 0, recBytes(byte(0), 0, 0, -1, -1, 1, 1, "h", 8, "x"), "header value length 8"},
		{"bytes left in record", 1, 0, recBytes(byte(0), 0, 0, -1, -1, 0, byte(7)), "bytes left after headers"},
		{"record attributes missing", 1, 0, []byte{0x00}, "length 0"},
		{"delta repeats", 2, 1, cat(simpleRec(0), simpleRec(0)), "offsetDelta 0"},
		{"delta decreases", 2, 2, cat(simpleRec(1), simpleRec(0)), "offsetDelta 0"},
		{"delta past lastOffsetDelta", 2, 1, cat(simpleRec(0), simpleRec(2)), "offsetDelta 2"},
		{"delta negative", 1, 0, simpleRec(-1), "offsetDelta -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := rawBatch{lastDelta: tc.lastDelta, n: tc.n, payload: tc.payload}.bytes()
			b, _, err := Parse(raw)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			_, err = b.Records()
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Records: %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Records: %q does not say %q", err, tc.msg)
			}
			if _, err := Validate(raw); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Validate: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestHeaderRules covers the header fields checked after Parse, and the difference
// between lenient Records and strict Validate.
func TestHeaderRules(t *testing.T) {
	two := append(simpleRec(0), simpleRec(1)...)
	gapped := append(simpleRec(0), simpleRec(5)...)
	cases := []struct {
		name       string
		rb         rawBatch
		records    error // from Records
		validate   error // from Validate
		numRecords int
	}{
		{"good", rawBatch{n: 2, lastDelta: 1, payload: two}, nil, nil, 2},
		{"gaps (compacted)", rawBatch{n: 2, lastDelta: 5, payload: gapped}, nil, ErrCorrupt, 2},
		{"lastOffsetDelta past last record", rawBatch{n: 2, lastDelta: 9, payload: two}, nil, ErrCorrupt, 2},
		{"empty batch (compacted)", rawBatch{n: 0, lastDelta: 3}, nil, ErrCorrupt, 0},
		{"numRecords negative", rawBatch{n: -1, lastDelta: 0}, ErrCorrupt, ErrCorrupt, 0},
		{"lastOffsetDelta negative", rawBatch{n: 0, lastDelta: -1}, ErrCorrupt, ErrCorrupt, 0},
		{"numRecords over offset span", rawBatch{n: 2, lastDelta: 0, payload: two}, ErrCorrupt, ErrCorrupt, 0},
		{"codec 5", rawBatch{attrs: 5, n: 2, lastDelta: 1, payload: two}, ErrUnsupportedCompression, ErrUnsupportedCompression, 0},
		{"codec 7", rawBatch{attrs: 7, n: 2, lastDelta: 1, payload: two}, ErrUnsupportedCompression, ErrUnsupportedCompression, 0},
		{"flags are not codec bits", rawBatch{attrs: 0x38, n: 2, lastDelta: 1, payload: two}, nil, nil, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.rb.bytes()
			b, _, err := Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := b.Records()
			if !errors.Is(err, tc.records) {
				t.Fatalf("Records: %v, want %v", err, tc.records)
			}
			if len(recs) != tc.numRecords {
				t.Fatalf("Records: %d records, want %d", len(recs), tc.numRecords)
			}
			if _, err := Validate(raw); !errors.Is(err, tc.validate) {
				t.Fatalf("Validate: %v, want %v", err, tc.validate)
			}
		})
	}
	b, _, _ := Parse(rawBatch{attrs: 0x38, n: 2, lastDelta: 1, payload: two}.bytes())
	if !b.LogAppendTime() || !b.Transactional() || !b.Control() {
		t.Fatalf("attributes 0x38: flags %v %v %v", b.LogAppendTime(), b.Transactional(), b.Control())
	}
}

func TestCompressionString(t *testing.T) {
	want := map[Compression]string{None: "none", Gzip: "gzip", Snappy: "snappy", LZ4: "lz4", Zstd: "zstd", 6: "compression(6)"}
	for c, s := range want {
		if c.String() != s {
			t.Errorf("%d: %q, want %q", c, c.String(), s)
		}
	}
}

// TestSetProducer: the producer fields read back as written and the batch still passes
// its CRC check; a short or non-v2 batch is refused.
func TestSetProducer(t *testing.T) {
	raw, err := Append(nil, []Record{{Value: []byte("v")}, {OffsetDelta: 1, Value: []byte("w")}}, DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := SetProducer(raw, 77, 3, 1<<30); err != nil {
		t.Fatal(err)
	}
	b, _, err := Parse(raw)
	if err != nil {
		t.Fatalf("after SetProducer: %v", err)
	}
	if b.ProducerID != 77 || b.ProducerEpoch != 3 || b.BaseSequence != 1<<30 {
		t.Fatalf("read back %d/%d/%d", b.ProducerID, b.ProducerEpoch, b.BaseSequence)
	}
	if err := SetProducer(raw[:10], 1, 0, 0); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short batch: %v", err)
	}
}

package streamapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

// goldenRecords are the records of testdata/binary/produce.bin: every field the framing
// carries, headers repeated, binary and null.
func goldenRecords() []Record {
	ts := int64(1700000000000)
	k := "user-1"
	return []Record{
		{Key: &k, Value: json.RawMessage(`{"id": 1}`), Timestamp: &ts,
			Headers: Headers{StringHeader("trace", "t1"), {Key: "trace", Value: []byte{0, 0xff}}, {Key: "null"}, StringHeader("", "")}},
		{KeyBase64: []byte{0xff}, ValueBase64: []byte{1, 2, 3}},
		{Value: json.RawMessage(`null`)}, // a tombstone
		{ValueBase64: []byte{}},          // an empty value
	}
}

const goldenNow = 1700000000123

// TestBinaryGolden: the client's batch for goldenRecords is the bytes of
// testdata/binary/produce.bin (written once, never regenerated), and those bytes decode
// to the records again.
func TestBinaryGolden(t *testing.T) {
	path := filepath.Join("testdata", "binary", "produce.bin")
	got, err := AppendBatch(nil, goldenRecords(), recordbatch.None, goldenNow)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("LOAM_WRITE_GOLDEN") == "1" {
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s exists: golden files are never regenerated", path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("batch bytes changed:\n got %x\nwant %x", got, want)
	}
	// The framing's fixed fields, read by hand: base offset 0 (the log assigns it),
	// magic 2, no compression, create time, no producer, 4 records at deltas 0..3.
	be := binary.BigEndian
	switch {
	case be.Uint64(want[0:]) != 0, int(be.Uint32(want[8:]))+12 != len(want), want[16] != 2,
		be.Uint16(want[21:]) != 0, be.Uint32(want[23:]) != 3, be.Uint64(want[27:]) != 1700000000000,
		be.Uint64(want[35:]) != goldenNow, int64(be.Uint64(want[43:])) != -1, int16(be.Uint16(want[51:])) != -1,
		int32(be.Uint32(want[53:])) != -1, be.Uint32(want[57:]) != 4:
		t.Fatalf("header fields of %x", want[:61])
	}
	if crc := crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli)); crc != be.Uint32(want[17:]) {
		t.Fatalf("crc %08x, stored %08x", crc, be.Uint32(want[17:]))
	}
	checkRoundTrip(t, goldenRecords(), want, goldenNow)
}

// checkRoundTrip checks that body (a batch of recs) passes CheckBatches and decodes to
// recs: keys, values (a JSON value without the whitespace around it), tombstones,
// timestamps (nowMs when absent) and headers exactly.
func checkRoundTrip(t *testing.T, recs []Record, body []byte, nowMs int64) {
	t.Helper()
	bs, err := CheckBatches(body, BatchLimits{MaxRecordBytes: 1 << 20, MaxRecords: 100})
	if err != nil || len(bs) != 1 || int(bs[0].Batch.NumRecords) != len(recs) {
		t.Fatalf("CheckBatches: %d batches, %v", len(bs), err)
	}
	body = slices.Clone(body)
	if err := recordbatch.SetBaseOffset(body, 40); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatches(body, 41)
	if err != nil || len(got) != len(recs)-1 {
		t.Fatalf("DecodeBatches from 41: %d records, %v", len(got), err)
	}
	for i, g := range got {
		w := recs[i+1]
		wk, _ := w.KeyBytes()
		wv, _ := w.Bytes()
		if w.ValueBase64 == nil && wv != nil {
			wv = bytes.TrimSpace(wv)
		}
		gk, _ := g.KeyBytes()
		gv, _ := g.Bytes()
		wts := nowMs
		if w.Timestamp != nil {
			wts = *w.Timestamp
		}
		switch {
		case *g.Offset != int64(41+i):
			t.Fatalf("record %d: offset %d", i+1, *g.Offset)
		case !bytes.Equal(gk, wk) || (gk == nil) != (wk == nil):
			t.Fatalf("record %d: key %q, want %q", i+1, gk, wk)
		case w.IsTombstone() != g.IsTombstone() || !bytes.Equal(gv, wv) || (!w.IsTombstone() && gv == nil):
			t.Fatalf("record %d: value %q, want %q", i+1, gv, wv)
		case *g.Timestamp != wts:
			t.Fatalf("record %d: timestamp %d, want %d", i+1, *g.Timestamp, wts)
		case !g.Headers.Equal(w.Headers):
			t.Fatalf("record %d: headers %+v, want %+v", i+1, g.Headers, w.Headers)
		}
	}
}

// TestBinaryRoundTrip: every codec's batch checks and decodes to its records.
func TestBinaryRoundTrip(t *testing.T) {
	recs := append([]Record{{Value: json.RawMessage(`0`)}}, goldenRecords()...)
	for _, c := range []recordbatch.Compression{recordbatch.None, recordbatch.Gzip, recordbatch.Snappy, recordbatch.LZ4, recordbatch.Zstd} {
		body, err := AppendBatch(nil, recs, c, 77)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, recs, body, 77)
	}
}

func TestAppendBatchRefuses(t *testing.T) {
	off := int64(1)
	neg := int64(-1)
	for _, r := range []Record{
		{Offset: &off, Value: json.RawMessage(`1`)},
		{Value: json.RawMessage(`{`)},
		{Value: json.RawMessage(`1`), ValueBase64: []byte{1}},
		{Value: json.RawMessage(`1`), Timestamp: &neg},
	} {
		if _, err := AppendBatch(nil, []Record{r}, recordbatch.None, 1); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%+v: %v, want ErrInvalidRecord", r, err)
		}
	}
}

func TestMediaTypes(t *testing.T) {
	for _, c := range []struct {
		accept string
		want   bool
	}{
		{MediaRecordBatch, true},
		{"application/json, " + MediaRecordBatch + ";q=0.9", true},
		{"APPLICATION/VND.LOAM.RECORDBATCH", true},
		{"application/json", false},
		{"*/*", false},
		{"", false},
	} {
		if got := AcceptsRecordBatch(c.accept); got != c.want {
			t.Errorf("AcceptsRecordBatch(%q) = %v", c.accept, got)
		}
	}
	if !IsMediaRecordBatch(MediaRecordBatch+"; charset=binary") || IsMediaRecordBatch("application/json") || IsMediaRecordBatch("") {
		t.Error("IsMediaRecordBatch")
	}
}

// FuzzCheckBatches: the binary produce decoder never panics; it refuses with a
// *BatchError naming a batch within the body and a known code, or accepts batches that
// cover the body exactly, each passing recordbatch.Validate, within the limits.
func FuzzCheckBatches(f *testing.F) {
	golden, err := AppendBatch(nil, goldenRecords(), recordbatch.None, goldenNow)
	if err != nil {
		f.Fatal(err)
	}
	gz, err := AppendBatch(nil, goldenRecords(), recordbatch.Gzip, goldenNow)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden, false)
	f.Add(append(slices.Clone(golden), gz...), false)
	f.Add(golden[:40], false)
	f.Add(append(slices.Clone(golden), 0), false)
	f.Add([]byte{}, false)
	f.Add(golden, true)
	idemOpt := recordbatch.DefaultBuildOptions()
	idemOpt.ProducerID, idemOpt.ProducerEpoch, idemOpt.BaseSequence = 7, 0, 0
	idem, err := recordbatch.Append(nil, []recordbatch.Record{{Timestamp: 1, Value: []byte("a")}, {Timestamp: 1, Value: []byte("b")}}, idemOpt)
	if err != nil {
		f.Fatal(err)
	}
	idemOpt.BaseSequence = 2
	idem, err = recordbatch.Append(idem, []recordbatch.Record{{Timestamp: 1, Value: []byte("c")}}, idemOpt)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(idem, false)
	lim := BatchLimits{MaxRecordBytes: 64, MaxRecords: 10, MaxDecompressed: 1 << 16}
	f.Fuzz(func(t *testing.T, body []byte, fixCRC bool) {
		if fixCRC && len(body) >= recordbatch.HeaderSize {
			// Reach the checks behind the CRC: make the first batch's CRC match.
			end := min(len(body), 12+int(int32(binary.BigEndian.Uint32(body[8:]))))
			if end > 21 {
				binary.BigEndian.PutUint32(body[17:], crc32.Checksum(body[21:end], crc32.MakeTable(crc32.Castagnoli)))
			}
		}
		bs, err := CheckBatches(body, lim)
		if err != nil {
			var be *BatchError
			if !errors.As(err, &be) || be.Msg == "" || be.Batch < -1 || be.Batch > len(body)/recordbatch.HeaderSize {
				t.Fatalf("error %v is not a BatchError naming a batch", err)
			}
			if be.Code != CodeInvalidRecord && be.Code != CodeRecordTooLarge && be.Code != CodeRequestTooLarge {
				t.Fatalf("code %q", be.Code)
			}
			if be.Batch >= 0 && !strings.HasPrefix(be.Msg, "batch ") {
				t.Fatalf("message %q does not name the batch", be.Msg)
			}
			return
		}
		total, n := 0, 0
		p := ProducerOf(bs)
		seq := p.BaseSequence
		for _, b := range bs {
			if b.Batch.ProducerID != p.ID || b.Batch.ProducerEpoch != p.Epoch || b.Batch.BaseSequence != seq {
				t.Fatalf("accepted batch of producer %d/%d/%d in a body of producer %+v (next sequence %d)", b.Batch.ProducerID, b.Batch.ProducerEpoch, b.Batch.BaseSequence, p, seq)
			}
			if p.Has() {
				seq = nextSequence(seq, b.Batch.OffsetCount())
			} else if p.Epoch != -1 || p.BaseSequence != -1 {
				t.Fatalf("accepted a batch without a producer id but with epoch %d, sequence %d", p.Epoch, p.BaseSequence)
			}
			total += len(b.Batch.Raw)
			n += int(b.Batch.NumRecords)
			if _, err := recordbatch.ValidateLimit(b.Batch.Raw, lim.MaxDecompressed); err != nil {
				t.Fatalf("accepted a batch Validate refuses: %v", err)
			}
			recs, err := b.Batch.RecordsLimit(lim.MaxDecompressed)
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				if recordSize(&recs[i]) > lim.MaxRecordBytes || recs[i].Timestamp < 0 {
					t.Fatalf("accepted record %+v", recs[i])
				}
			}
		}
		if total != len(body) || n > lim.MaxRecords || len(bs) == 0 {
			t.Fatalf("accepted %d batches of %d bytes, %d records, for a body of %d bytes", len(bs), total, n, len(body))
		}
	})
}

// Golden vectors of Kafka's UtilsTest.testMurmur2: the client places keyed records where
// Kafka clients and the log node do.
func TestKeyPartitionKafkaVectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(murmur2([]byte(c.in))); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
		if got, want := KeyPartition([]byte(c.in), 7), int32(uint32(c.want)&0x7fffffff)%7; got != want {
			t.Errorf("KeyPartition(%q, 7) = %d, want %d", c.in, got, want)
		}
	}
}

// FuzzDecodeBatches: the client's binary fetch decoder never panics; what it accepts are
// records at or past from, whose JSON form
// is valid and reads back the same value bytes.
func FuzzDecodeBatches(f *testing.F) {
	golden, err := AppendBatch(nil, goldenRecords(), recordbatch.None, goldenNow)
	if err != nil {
		f.Fatal(err)
	}
	zs, err := AppendBatch(nil, goldenRecords(), recordbatch.Zstd, goldenNow)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden, int64(0))
	f.Add(append(slices.Clone(golden), zs...), int64(2))
	f.Add(golden[:50], int64(0))
	f.Add([]byte{}, int64(5))
	f.Fuzz(func(t *testing.T, body []byte, from int64) {
		recs, err := DecodeBatches(body, from)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Offset == nil || *r.Offset < from {
				t.Fatalf("record at %v, fetched from %d", r.Offset, from)
			}
			b, err := AppendRecordJSON(nil, r)
			if err != nil || !json.Valid(b) {
				t.Fatalf("record JSON %q: %v", b, err)
			}
			var back Record
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			v1, _ := r.Bytes()
			v2, _ := back.Bytes()
			if !bytes.Equal(v1, v2) || !back.Headers.Equal(r.Headers) {
				t.Fatalf("record %s does not read back", b)
			}
		}
	})
}

package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// fuzzLimit keeps fuzzing memory small; the limit logic itself is tested elsewhere.
const fuzzLimit = 1 << 20

// addSeeds gives every fuzz target the golden files, a batch of every codec, a
// concatenation, and a few broken variants.
func addSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/v1/*.bin")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var cat []byte
	for _, c := range allCodecs {
		b, err := Append(nil, textRecords(3, 40, uint64(c)), withCodec(c))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
		cat = append(cat, b...)
	}
	f.Add(cat)
	f.Add(rawBatch{n: 2, lastDelta: 5, payload: append(simpleRec(0), simpleRec(5)...)}.bytes())
	f.Add(rawBatch{n: 0, lastDelta: 3}.bytes())
	f.Add([]byte{})
}

// FuzzParse: Parse never panics; on success Raw is a prefix of the input, rest the
// remainder, the header fields re-encode to the same bytes, and SetBaseOffset keeps it
// parseable with the same CRC.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		b, rest, err := Parse(in)
		if err != nil {
			if len(rest) != len(in) {
				t.Fatalf("error %v with rest of %d bytes, want the whole input", err, len(rest))
			}
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrBadCRC) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(b.Raw)+len(rest) != len(in) || !bytes.Equal(b.Raw, in[:len(b.Raw)]) {
			t.Fatalf("Raw (%d) + rest (%d) != input (%d)", len(b.Raw), len(rest), len(in))
		}
		if int(b.BatchLength)+12 != len(b.Raw) || b.Magic != Magic {
			t.Fatalf("BatchLength %d for %d raw bytes, magic %d", b.BatchLength, len(b.Raw), b.Magic)
		}
		if got, want := b.Checksum(), crc32.Checksum(b.Raw, castagnoli); got != want {
			t.Fatalf("Checksum 0x%08x, CRC-32C of Raw 0x%08x", got, want)
		}
		hdr := rawBatch{base: b.BaseOffset, attrs: b.Attributes, lastDelta: b.LastOffsetDelta, firstTS: b.FirstTimestamp,
			maxTS: b.MaxTimestamp, n: b.NumRecords, payload: b.Raw[HeaderSize:]}.bytes()
		// rawBatch writes -1 for the producer fields and the leader epoch; compare the rest.
		for _, r := range [][2]int{{0, 12}, {16, 17}, {21, 43}, {57, len(b.Raw)}} {
			if !bytes.Equal(hdr[r[0]:r[1]], b.Raw[r[0]:r[1]]) {
				t.Fatalf("bytes %d..%d do not re-encode from the parsed fields", r[0], r[1])
			}
		}
		cp := append([]byte(nil), b.Raw...)
		if err := SetBaseOffset(cp, ^b.BaseOffset); err != nil {
			t.Fatal(err)
		}
		b2, _, err := Parse(cp)
		if err != nil || b2.BaseOffset != ^b.BaseOffset || b2.CRC != b.CRC {
			t.Fatalf("after SetBaseOffset: %v, base %d", err, b2.BaseOffset)
		}
	})
}

// sealed makes in one batch with a correct length, magic and CRC (when it is long
// enough for a header), so that mutations get past Parse to the records.
func sealed(in []byte) []byte {
	if len(in) < HeaderSize {
		return in
	}
	b := append([]byte(nil), in...)
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-lengthPrefix))
	b[offMagic] = byte(Magic)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// FuzzValidate: Validate never panics; what it accepts covers the input exactly, every
// batch decodes with Records under the same limit, and rebuilding each batch's records
// with Append gives bytes Validate accepts and that decode to the same records. The
// input is checked as given and sealed into one batch.
func FuzzValidate(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		checkValidate(t, in)
		checkValidate(t, sealed(in))
	})
}

func checkValidate(t *testing.T, in []byte) {
	{
		bs, err := ValidateLimit(in, fuzzLimit)
		if err != nil {
			return
		}
		total := 0
		for i, b := range bs {
			total += len(b.Raw)
			recs, err := b.RecordsLimit(fuzzLimit)
			if err != nil {
				t.Fatalf("batch %d passed Validate but Records fails: %v", i, err)
			}
			if len(recs) != int(b.NumRecords) || int64(len(recs)) != b.OffsetCount() {
				t.Fatalf("batch %d: %d records, numRecords %d, offset count %d", i, len(recs), b.NumRecords, b.OffsetCount())
			}
			for j, r := range recs {
				if r.OffsetDelta != int32(j) {
					t.Fatalf("batch %d record %d: offsetDelta %d", i, j, r.OffsetDelta)
				}
			}
			roundTrip(t, b, recs, true)
		}
		if total != len(in) {
			t.Fatalf("batches cover %d of %d bytes", total, len(in))
		}
	}
}

// FuzzRecords: Records never panics on a batch that parses; what it decodes rebuilds
// with Append into a batch that decodes to the same records. The input is sealed into
// one batch first, so every input of header size or more reaches Records.
func FuzzRecords(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		b, _, err := Parse(sealed(in))
		if err != nil {
			if len(in) >= HeaderSize {
				t.Fatalf("sealed input does not parse: %v", err)
			}
			return
		}
		recs, err := b.RecordsLimit(fuzzLimit)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedCompression) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(recs) != int(b.NumRecords) {
			t.Fatalf("%d records, numRecords %d", len(recs), b.NumRecords)
		}
		for j, r := range recs {
			if r.OffsetDelta < 0 || r.OffsetDelta > b.LastOffsetDelta || j > 0 && r.OffsetDelta <= recs[j-1].OffsetDelta {
				t.Fatalf("record %d: offsetDelta %d, last %d", j, r.OffsetDelta, b.LastOffsetDelta)
			}
		}
		if len(recs) > 0 {
			roundTrip(t, b, recs, false)
		}
	})
}

// roundTrip re-encodes recs with b's header fields and codec and checks the result.
func roundTrip(t *testing.T, b Batch, recs []Record, strict bool) {
	t.Helper()
	opt := BuildOptions{BaseOffset: b.BaseOffset, Compression: b.Compression(), ProducerID: b.ProducerID,
		ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence}
	raw, err := Append(nil, recs, opt)
	if err != nil {
		t.Fatalf("Append of decoded records: %v", err)
	}
	if strict {
		if _, err := ValidateLimit(raw, fuzzLimit+len(raw)); err != nil {
			t.Fatalf("Validate of rebuilt batch: %v", err)
		}
	}
	b2, rest, err := Parse(raw)
	if err != nil || len(rest) != 0 {
		t.Fatalf("Parse of rebuilt batch: %v", err)
	}
	if b2.BaseOffset != b.BaseOffset || b2.ProducerID != b.ProducerID || b2.ProducerEpoch != b.ProducerEpoch ||
		b2.BaseSequence != b.BaseSequence || b2.NumRecords != b.NumRecords || b2.Compression() != b.Compression() ||
		b2.LastOffsetDelta != recs[len(recs)-1].OffsetDelta {
		t.Fatalf("rebuilt header %+v from %+v", b2, b)
	}
	got, err := b2.RecordsLimit(fuzzLimit + len(raw))
	if err != nil {
		t.Fatalf("Records of rebuilt batch: %v", err)
	}
	if d := diffRecords(recs, got); d != "" {
		t.Fatalf("rebuilt batch: %s", d)
	}
}

// FuzzScan: Scan never panics, agrees with RecordsLimit on every batch (both succeed or
// both fail) and reports each record's index, timestamp and size as Records decodes them.
func FuzzScan(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		b, _, err := Parse(in)
		if err != nil {
			return
		}
		recs, rerr := b.RecordsLimit(fuzzLimit)
		var got []Record
		serr := b.Scan(fuzzLimit, func(i int, ts int64, size int) error {
			if i != len(got) {
				t.Fatalf("record index %d after %d records", i, len(got))
			}
			got = append(got, Record{Timestamp: ts, Value: make([]byte, size)})
			return nil
		})
		if (rerr == nil) != (serr == nil) {
			t.Fatalf("RecordsLimit: %v, Scan: %v", rerr, serr)
		}
		if serr != nil {
			if !errors.Is(serr, ErrCorrupt) && !errors.Is(serr, ErrTooLarge) && !errors.Is(serr, ErrUnsupportedCompression) {
				t.Fatalf("Scan error %v wraps no sentinel", serr)
			}
			return
		}
		if len(got) != len(recs) {
			t.Fatalf("Scan saw %d records, Records %d", len(got), len(recs))
		}
		for i, r := range recs {
			size := len(r.Key) + len(r.Value)
			for _, h := range r.Headers {
				size += len(h.Key) + len(h.Value)
			}
			if got[i].Timestamp != r.Timestamp || len(got[i].Value) != size {
				t.Fatalf("record %d: Scan timestamp %d size %d, Records %d and %d", i, got[i].Timestamp, len(got[i].Value), r.Timestamp, size)
			}
		}
	})
}

package recordbatch

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
)

// bombBatch wraps payload (claimed to be c) in a valid header and CRC.
func bombBatch(c Compression, payload []byte) []byte {
	return rawBatch{attrs: int16(c), n: 1, lastDelta: 0, payload: payload}.bytes()
}

// allocated reports the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecompressionLimit: a payload that inflates past the limit fails with ErrTooLarge
// and allocates about the limit, not the inflated size.
func TestDecompressionLimit(t *testing.T) {
	zeros := make([]byte, 4<<20)
	const limit = 256 << 10
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			payload, err := compress(nil, zeros, c)
			if err != nil {
				t.Fatal(err)
			}
			raw := bombBatch(c, payload)
			b, _, err := Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			var rerr, verr error
			n := allocated(func() {
				_, rerr = b.RecordsLimit(limit)
				_, verr = ValidateLimit(raw, limit)
			})
			if !errors.Is(rerr, ErrTooLarge) || !errors.Is(verr, ErrTooLarge) {
				t.Fatalf("%d-byte payload inflating to %d: Records %v, Validate %v; want ErrTooLarge", len(payload), len(zeros), rerr, verr)
			}
			if n > 8*limit {
				t.Fatalf("refusing a %d-byte bomb with a %d-byte limit allocated %d bytes", len(zeros), limit, n)
			}
		})
	}
}

// TestDefaultLimitRefusesBomb: a zstd frame declaring 1 GiB of content is refused with
// the default limit before the decoder allocates it.
func TestDefaultLimitRefusesBomb(t *testing.T) {
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic; single segment, 8-byte content size
	frame = binary.LittleEndian.AppendUint64(frame, 1<<30)
	frame = append(frame, 0x03|1<<1, 0x00, 0x20, 0x00) // last RLE block of 128 KiB ...
	raw := bombBatch(Zstd, frame)
	var verr error
	n := allocated(func() { _, verr = Validate(raw) })
	if !errors.Is(verr, ErrTooLarge) {
		t.Fatalf("Validate: %v, want ErrTooLarge", verr)
	}
	if n > 4<<20 {
		t.Fatalf("refusing a 1 GiB frame allocated %d bytes", n)
	}
	t.Logf("%v", verr)
}

// TestForgedSnappyLengths: snappy and xerial headers claiming huge outputs are refused
// before anything that size is allocated.
func TestForgedSnappyLengths(t *testing.T) {
	raw := binary.AppendUvarint(nil, 1<<31) // raw block claiming 2 GiB
	raw = append(raw, 0, 0, 0, 0)
	xer := appendXerial(nil, nil)
	for range 4 { // four blocks each claiming 1 GiB
		blk := binary.AppendUvarint(nil, 1<<30)
		xer = binary.BigEndian.AppendUint32(xer, uint32(len(blk)))
		xer = append(xer, blk...)
	}
	for name, payload := range map[string][]byte{"raw": raw, "xerial": xer} {
		t.Run(name, func(t *testing.T) {
			b, _, err := Parse(bombBatch(Snappy, payload))
			if err != nil {
				t.Fatal(err)
			}
			var rerr error
			n := allocated(func() { _, rerr = b.Records() })
			if !errors.Is(rerr, ErrTooLarge) {
				t.Fatalf("Records: %v, want ErrTooLarge", rerr)
			}
			if n > 1<<20 {
				t.Fatalf("allocated %d bytes", n)
			}
		})
	}
}

func TestLimitBoundary(t *testing.T) {
	recs := textRecords(20, 500, 9)
	section := recordsSection(recs)
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		raw := mustAppend(t, nil, recs, withCodec(c))
		b, _, _ := Parse(raw)
		if _, err := b.RecordsLimit(len(section)); err != nil {
			t.Errorf("%s: limit = size: %v", c, err)
		}
		if _, err := b.RecordsLimit(len(section) - 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: limit = size-1: %v, want ErrTooLarge", c, err)
		}
		if _, err := ValidateLimit(raw, len(section)-1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: ValidateLimit size-1: %v, want ErrTooLarge", c, err)
		}
	}
}

// TestBadPayloads: garbage, truncated and mislabeled payloads are ErrCorrupt.
func TestBadPayloads(t *testing.T) {
	recs := textRecords(10, 200, 5)
	section := recordsSection(recs)
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		good, err := compress(nil, section, c)
		if err != nil {
			t.Fatal(err)
		}
		other := Zstd
		if c == Zstd {
			other = Gzip
		}
		cases := map[string][]byte{
			"garbage":       []byte("this is not a compressed stream at all, not even close"),
			"empty":         {},
			"truncated":     good[:len(good)/2],
			"one byte cut":  good[:len(good)-1],
			"uncompressed":  section,
			"other codec":   must(compress(nil, section, other)),
			"xerial broken": append(appendXerial(nil, nil), 0, 0, 0, 9, 1),
		}
		for name, payload := range cases {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				raw := rawBatch{attrs: int16(c), n: 10, lastDelta: 9, payload: payload}.bytes()
				b, _, err := Parse(raw)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.Records(); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Records: %v, want ErrCorrupt", err)
				}
				if _, err := Validate(raw); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Validate: %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

func TestRawSnappyRead(t *testing.T) {
	recs := textRecords(30, 100, 11)
	section := recordsSection(recs)
	raw := rawBatch{attrs: int16(Snappy), n: 30, lastDelta: 29, firstTS: recs[0].Timestamp, payload: s2.EncodeSnappy(nil, section)}.bytes()
	bs, err := Validate(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bs[0].Records()
	if err != nil {
		t.Fatal(err)
	}
	if d := diffRecords(withDeltas(recs), got); d != "" {
		t.Fatal(d)
	}
}

// recordsSection is the uncompressed records section Append writes for recs.
func recordsSection(recs []Record) []byte {
	deltaOf := func(i int) int32 { return int32(i) }
	if _, err := recordsSize(recs, recs[0].Timestamp, deltaOf); err != nil {
		panic(err)
	}
	return appendRecords(nil, recs, recs[0].Timestamp, deltaOf)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestManyLimitsAndConcurrency: many distinct limits (past the shared decoder cache)
// and concurrent use of the shared encoders, decoders and pools give the same records.
func TestManyLimitsAndConcurrency(t *testing.T) {
	recs := textRecords(20, 300, 21)
	want := withDeltas(recs)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Go(func() {
			for i := range 12 {
				c := allCodecs[(g+i)%len(allCodecs)]
				raw, err := Append(nil, recs, withCodec(c))
				if err != nil {
					errs <- err
					return
				}
				bs, err := ValidateLimit(raw, 1<<20+g*16+i)
				if err != nil {
					errs <- err
					return
				}
				got, err := bs[0].RecordsLimit(1<<20 + g*16 + i)
				if err != nil {
					errs <- err
					return
				}
				if d := diffRecords(want, got); d != "" {
					errs <- errors.New(d)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

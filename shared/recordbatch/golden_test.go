package recordbatch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
)

// goldenHex is a small uncompressed batch written by hand from the spec layout, field
// by field. testdata/v1/uncompressed.bin holds the same bytes and is never regenerated.
var goldenHex = strings.Join([]string{
	"0000000000000005", // baseOffset 5
	"00000048",         // batchLength 72 (84 bytes in all)
	"ffffffff",         // partitionLeaderEpoch -1
	"02",               // magic 2
	"ba06b778",         // crc: CRC32C of bytes 21..84
	"0000",             // attributes: no compression, create time
	"00000001",         // lastOffsetDelta 1
	"0000018bcfe56800", // firstTimestamp 1700000000000
	"0000018bcfe5680a", // maxTimestamp 1700000000010
	"ffffffffffffffff", // producerId -1
	"ffff",             // producerEpoch -1
	"ffffffff",         // baseSequence -1
	"00000002",         // numRecords 2
	// record 0
	"1e",           // length 15 (zigzag 30)
	"00",           // attributes
	"00",           // timestampDelta 0
	"00",           // offsetDelta 0
	"026b",         // key length 1, "k"
	"0a68656c6c6f", // value length 5, "hello"
	"02",           // 1 header
	"0268",         // header key length 1, "h"
	"01",           // header value length -1: null
	// record 1
	"0c", // length 6
	"00", // attributes
	"14", // timestampDelta 10
	"02", // offsetDelta 1
	"01", // key length -1: null
	"00", // value length 0: empty, not null
	"00", // no headers
}, "")

var goldenRecords = []Record{
	{OffsetDelta: 0, Timestamp: 1_700_000_000_000, Key: []byte("k"), Value: []byte("hello"), Headers: []Header{{Key: "h"}}},
	{OffsetDelta: 1, Timestamp: 1_700_000_000_010, Key: nil, Value: []byte{}},
}

var goldenOptions = BuildOptions{BaseOffset: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// goldenCompressed are the compressed goldens, written once by TestCreateGolden from
// goldenRecords. Compressed bytes depend on the codec library's version, so only their
// decoding is checked, never that Append reproduces them.
var goldenCompressed = map[string]Compression{
	"gzip.bin":          Gzip,
	"snappy-xerial.bin": Snappy,
	"snappy-raw.bin":    Snappy,
	"lz4.bin":           LZ4,
	"zstd.bin":          Zstd,
}

func TestGoldenUncompressed(t *testing.T) {
	want, err := hex.DecodeString(goldenHex)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("testdata/v1/uncompressed.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, want) {
		t.Fatalf("testdata/v1/uncompressed.bin differs from the hand-built bytes:\n file %x\n want %x", file, want)
	}
	got := mustAppend(t, nil, goldenRecords, goldenOptions)
	if !bytes.Equal(got, want) {
		t.Fatalf("Append differs from the hand-built batch:\n got  %x\n want %x", got, want)
	}
	b, rest, err := Parse(file)
	if err != nil || len(rest) != 0 {
		t.Fatalf("Parse: %v, %d bytes left", err, len(rest))
	}
	if b.BaseOffset != 5 || b.BatchLength != 72 || b.CRC != 0xba06b778 || b.LastOffsetDelta != 1 ||
		b.FirstTimestamp != 1_700_000_000_000 || b.MaxTimestamp != 1_700_000_000_010 || b.NumRecords != 2 ||
		b.ProducerID != -1 || b.ProducerEpoch != -1 || b.BaseSequence != -1 || b.PartitionLeaderEpoch != -1 {
		t.Fatalf("header %+v", b)
	}
	recs, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	if d := diffRecords(goldenRecords, recs); d != "" {
		t.Fatal(d)
	}
	if _, err := Validate(file); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenCompressed(t *testing.T) {
	for name, c := range goldenCompressed {
		t.Run(name, func(t *testing.T) {
			file, err := os.ReadFile(filepath.Join("testdata/v1", name))
			if err != nil {
				t.Fatal(err)
			}
			bs, err := Validate(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(bs) != 1 || bs[0].Compression() != c || bs[0].BaseOffset != 5 {
				t.Fatalf("%d batches, codec %s", len(bs), bs[0].Compression())
			}
			recs, err := bs[0].Records()
			if err != nil {
				t.Fatal(err)
			}
			if d := diffRecords(goldenRecords, recs); d != "" {
				t.Fatal(d)
			}
			payload := bs[0].Raw[HeaderSize:]
			xerial := bytes.HasPrefix(payload, xerialMagic)
			if name == "snappy-xerial.bin" && !xerial || name == "snappy-raw.bin" && xerial {
				t.Fatalf("payload framing: xerial=%v", xerial)
			}
		})
	}
}

// TestCreateGolden writes golden files that do not exist yet, and never overwrites
// one. Run with RECORDBATCH_CREATE_GOLDEN=1 after adding a name above.
func TestCreateGolden(t *testing.T) {
	if os.Getenv("RECORDBATCH_CREATE_GOLDEN") == "" {
		t.Skip("set RECORDBATCH_CREATE_GOLDEN=1 to create missing golden files")
	}
	write := func(name string, b []byte) {
		path := filepath.Join("testdata/v1", name)
		if _, err := os.Stat(path); err == nil {
			t.Logf("%s exists, left alone", path)
			return
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("created %s", path)
	}
	if err := os.MkdirAll("testdata/v1", 0o755); err != nil {
		t.Fatal(err)
	}
	plain, _ := hex.DecodeString(goldenHex)
	write("uncompressed.bin", plain)
	for name, c := range goldenCompressed {
		opt := goldenOptions
		opt.Compression = c
		b := mustAppend(t, nil, goldenRecords, opt)
		if name == "snappy-raw.bin" {
			// Non-Java clients write one raw snappy block without xerial framing.
			b = rawBatch{base: 5, attrs: int16(Snappy), lastDelta: 1, firstTS: 1_700_000_000_000, maxTS: 1_700_000_000_010, n: 2,
				payload: s2.EncodeSnappy(nil, plain[HeaderSize:])}.bytes()
		}
		write(name, b)
	}
}

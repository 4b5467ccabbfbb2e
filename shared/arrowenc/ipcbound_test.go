package arrowenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// corpusBytes reads the []byte of a one-value fuzz corpus file.
func corpusBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[1])
	s = strings.TrimSuffix(strings.TrimPrefix(s, "[]byte("), ")")
	v, err := strconv.Unquote(s)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(v)
}

// TestIPCBodyLengthBounded: a record batch message claiming a body of 32 GiB in a stream
// of 640 bytes is refused, by ReadIPC and by DecodePayload, without allocating it
// (arrow-go's ipc.NewReader does not apply its body size limit option: the readers are
// built on a message reader that does).
func TestIPCBodyLengthBounded(t *testing.T) {
	b := corpusBytes(t, "testdata/fuzz/FuzzReadIPC/body-length-oom")
	if _, _, err := ReadIPC(b); err == nil || !strings.Contains(err.Error(), "body length") {
		t.Fatalf("ReadIPC: %v, want the body length refused", err)
	}
	frame := []byte(payloadMagic + "\x01\x00\x00\x00")
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(b)))
	if _, err := DecodePayload(append(frame, b...)); err == nil || !strings.Contains(err.Error(), "body length") {
		t.Fatalf("DecodePayload: %v, want the body length refused", err)
	}
}

// TestIPCDecompressedBounded: a compressed record batch whose buffer claims to decompress
// to more than MaxDecompressed is refused before arrow-go allocates it (it allocates the
// claimed size: the fuzzer's compressed-buffer-oom claimed 7 TB); stored frames, never
// compressed, refuse compression outright.
func TestIPCDecompressedBounded(t *testing.T) {
	if _, _, err := ReadIPC(corpusBytes(t, "testdata/fuzz/FuzzReadIPC/compressed-buffer-oom")); !errors.Is(err, ErrInvalidIPC) {
		t.Fatalf("the fuzzer's stream: %v", err)
	}
	s, _ := ParseSchema([]byte(`{"fields":[{"name":"id","type":"int64","nullable":false}]}`))
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.Arrow())
	for i := 0; i < 1000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s.Arrow()), ipc.WithZstd())
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	rec.Release()
	b.Release()
	good := buf.Bytes()
	if _, bs, err := ReadIPC(good); err != nil {
		t.Fatal(err)
	} else {
		releaseAll(bs)
	}
	// The values buffer's size prefix: 1000 int64s, 8000 bytes; claim 1 TB.
	i := bytes.Index(good, binary.LittleEndian.AppendUint64(nil, 8000))
	if i < 0 {
		t.Fatal("no size prefix of 8000 bytes in the stream")
	}
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint64(bad[i:], 1<<40)
	if _, _, err := ReadIPC(bad); err == nil || !strings.Contains(err.Error(), "would decompress to 1099511627776 bytes") {
		t.Fatalf("ReadIPC: %v, want the decompressed size refused", err)
	}
	frame := []byte(payloadMagic + "\x01\x00\x00\x00")
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint32(frame, 1000)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(good)))
	if _, err := DecodePayload(append(frame, good...)); err == nil || !strings.Contains(err.Error(), "compressed record batches are not accepted") {
		t.Fatalf("DecodePayload: %v, want compression refused", err)
	}
}

// TestReadIPCCompressed: a client's LZ4 or ZSTD compressed stream within the bound reads
// back its values (and is stored uncompressed, as EncodePayload writes).
func TestReadIPCCompressed(t *testing.T) {
	s, _ := ParseSchema([]byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"s","type":"utf8","nullable":true}]}`))
	for name, opt := range map[string]ipc.Option{"lz4": ipc.WithLZ4(), "zstd": ipc.WithZstd()} {
		b := array.NewRecordBuilder(memory.DefaultAllocator, s.Arrow())
		for i := 0; i < 1000; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.StringBuilder).Append("some text that compresses")
		}
		rec := b.NewRecordBatch()
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(s.Arrow()), opt)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		rec.Release()
		b.Release()
		_, batches, err := ReadIPC(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if batches[0].NumRows() != 1000 || batches[0].Column(0).(*array.Int64).Value(999) != 999 {
			t.Fatalf("%s: %d rows", name, batches[0].NumRows())
		}
		p, err := EncodePayload(1, batches...)
		releaseAll(batches)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := DecodePayload(p)
		if err != nil {
			t.Fatalf("%s: stored: %v", name, err)
		}
		ReleaseFrames(fs)
	}
}

// TestIPCShortBuffers: batches whose buffers are shorter than their rows need are
// refused by ReadIPC and DecodePayload (rendering their rows indexed past the buffers: a
// panic on every fetch of the partition they were stored in), and so are batches that
// describe fewer buffers than their columns need (arrow-go reads buffer descriptors by
// index past the vector).
func TestIPCShortBuffers(t *testing.T) {
	for _, seed := range []string{"bool-values-short", "validity-short", "buffer-index-past-vector"} {
		b := corpusBytes(t, "testdata/fuzz/FuzzReadIPC/"+seed)
		as, batches, err := ReadIPC(b)
		if err == nil {
			all, _ := Project(as, nil)
			for _, rb := range batches {
				for i := 0; i < int(rb.NumRows()); i++ {
					AppendRowJSON(nil, rb, i, all)
				}
			}
			releaseAll(batches)
			t.Fatalf("%s: ReadIPC accepted it", seed)
		}
		if !errors.Is(err, ErrInvalidIPC) {
			t.Fatalf("%s: %v", seed, err)
		}
		frame := []byte(payloadMagic + "\x01\x00\x00\x00")
		frame = binary.BigEndian.AppendUint32(frame, 1)
		frame = binary.BigEndian.AppendUint32(frame, 1)
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(b)))
		if _, err := DecodePayload(append(frame, b...)); err == nil {
			t.Fatalf("%s: DecodePayload accepted it", seed)
		}
	}
	short := memory.NewBufferBytes(make([]byte, 1))
	for want, d := range map[string]arrow.ArrayData{
		"bool values buffer of 1 bytes, 64 rows need 8":  array.NewData(arrow.FixedWidthTypes.Boolean, 64, []*memory.Buffer{nil, short}, nil, 0, 0),
		"int64 values buffer of 1 bytes, 2 rows need 16": array.NewData(arrow.PrimitiveTypes.Int64, 2, []*memory.Buffer{nil, short}, nil, 0, 0),
		"validity buffer of 1 bytes, 9 rows need 2":      array.NewData(arrow.PrimitiveTypes.Int8, 9, []*memory.Buffer{short, memory.NewBufferBytes(make([]byte, 9))}, nil, -1, 0),
		"offsets buffer of 1 bytes, 1 rows need 8":       array.NewData(arrow.BinaryTypes.String, 1, []*memory.Buffer{nil, short, short}, nil, 0, 0),
	} {
		if err := checkArrayBuffers(d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %s", err, want)
		}
	}
}

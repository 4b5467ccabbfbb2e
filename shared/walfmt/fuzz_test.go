package walfmt

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// reseal returns a copy of obj with every CRC it can locate recomputed, so fuzzed inputs
// get past the checksums and exercise the field checks behind them.
func reseal(obj []byte) []byte {
	b := slices.Clone(obj)
	be := binary.BigEndian
	if len(b) < 12 {
		return b
	}
	pos := int(be.Uint16(b[10:12]))
	if pos < 4 || pos > len(b) {
		return b
	}
	be.PutUint32(b[pos-4:], crc32.Checksum(b[:pos-4], castagnoli))
	for pos+ChunkHeaderSize <= len(b) && string(b[pos:pos+2]) == chunkMagic {
		end := pos + ChunkHeaderSize + int(be.Uint32(b[pos+36:]))
		if end > len(b) {
			break
		}
		resealChunk(b[pos:end])
		pos = end
	}
	if len(b) >= FooterSize {
		f := b[len(b)-FooterSize:]
		if off := be.Uint64(f); off <= uint64(len(b)-FooterSize) {
			sum := crc32.Update(crc32.Checksum(b[off:len(b)-FooterSize], castagnoli), castagnoli, f[:12])
			be.PutUint32(f[12:], sum)
		}
	}
	return b
}

// resealChunk recomputes a chunk's payload and header CRCs in place.
func resealChunk(c []byte) {
	if len(c) >= ChunkHeaderSizeV2 && c[2] == chunkVersionV2 {
		binary.BigEndian.PutUint32(c[40:], crc32.Checksum(c[ChunkHeaderSizeV2:], castagnoli))
		binary.BigEndian.PutUint32(c[48:], crc32.Checksum(c[:48], castagnoli))
		return
	}
	if len(c) < ChunkHeaderSize {
		return
	}
	binary.BigEndian.PutUint32(c[40:], crc32.Checksum(c[ChunkHeaderSize:], castagnoli))
	binary.BigEndian.PutUint32(c[44:], crc32.Checksum(c[:44], castagnoli))
}

// FuzzDecode feeds arbitrary bytes to Decode. Invariants: Decode never panics; whatever it
// accepts is canonical (re-encoding its header and chunks reproduces the input byte for
// byte), every chunk it lists decodes alone, and ReadIndex reads the same index.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenCases() {
		obj, _ := g.encode(f)
		f.Add(obj)
		f.Add(obj[:len(obj)/2])
	}
	f.Add([]byte("LOAMWAL\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, obj []byte) {
		checkDecode(t, obj)
		checkDecode(t, reseal(obj))
	})
}

func checkDecode(t *testing.T, obj []byte) {
	o, err := Decode(obj)
	if err != nil {
		if o != nil {
			t.Fatal("Decode returned an object with an error")
		}
		mustDecodeFail(t, "Decode", err)
		return
	}
	chunks := make([]Chunk, len(o.Chunks))
	for i, r := range o.Chunks {
		ref, payload, err := DecodeChunk(obj[r.Offset : r.Offset+r.Length])
		if err != nil {
			t.Fatalf("chunk %d of an accepted object: %v", i, err)
		}
		chunks[i] = Chunk{StreamID: ref.StreamID, Partition: ref.Partition, Encoding: ref.Encoding, Records: ref.Records,
			MaxTimestamp: ref.MaxTimestamp, Payload: payload, Encrypted: ref.Encrypted, EnvelopeLen: ref.EnvelopeLen}
	}
	again, refs, err := AppendObject(nil, o.Header, slices.Clone(chunks))
	if err != nil {
		t.Fatalf("re-encode an accepted object: %v", err)
	}
	if !bytes.Equal(again, obj) || !slices.Equal(refs, o.Chunks) {
		t.Fatal("accepted object is not canonical: re-encoding differs")
	}
	for i := range chunks {
		chunks[i].Parts, chunks[i].Payload = splitParts(chunks[i].Payload), nil
	}
	if again, _, err := AppendObject(nil, o.Header, chunks); err != nil || !bytes.Equal(again, obj) {
		t.Fatalf("accepted object re-encoded from payloads in parts differs (err %v)", err)
	}
	o2, err := ReadIndex(t.Context(), memReader{"k": obj}, "k", int64(len(obj)))
	if err != nil || o2.Header != o.Header || !slices.Equal(o2.Chunks, o.Chunks) {
		t.Fatalf("ReadIndex disagrees with Decode: %v", err)
	}
}

// FuzzDecodeChunk feeds arbitrary bytes to DecodeChunk. Invariants: no panic; an accepted
// chunk re-encodes to the same bytes, its Length is the input length and its payload is
// the input's tail.
func FuzzDecodeChunk(f *testing.F) {
	for _, g := range goldenCases() {
		obj, refs := g.encode(f)
		for _, r := range refs {
			chunk := obj[r.Offset : r.Offset+r.Length]
			f.Add(chunk)
			f.Add(chunk[:ChunkHeaderSize])
		}
	}
	f.Add([]byte("LC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeChunk(t, b)
		b = slices.Clone(b)
		resealChunk(b)
		checkDecodeChunk(t, b)
	})
}

func checkDecodeChunk(t *testing.T, b []byte) {
	ref, payload, err := DecodeChunk(b)
	if err != nil {
		mustDecodeFail(t, "DecodeChunk", err)
		return
	}
	hsize := ChunkHeaderSize
	if ref.Encrypted {
		hsize = ChunkHeaderSizeV2
	}
	if ref.Offset != 0 || ref.Length != int64(len(b)) || !bytes.Equal(payload, b[hsize:]) {
		t.Fatalf("accepted chunk: ref %+v, payload of %d bytes, input of %d", ref, len(payload), len(b))
	}
	c := Chunk{StreamID: ref.StreamID, Partition: ref.Partition, Encoding: ref.Encoding, Records: ref.Records,
		MaxTimestamp: ref.MaxTimestamp, Payload: payload, Encrypted: ref.Encrypted, EnvelopeLen: ref.EnvelopeLen}
	if err := checkChunk(&c); err != nil {
		t.Fatalf("accepted chunk fails the encoder's checks: %v", err)
	}
	if again := appendChunk(nil, &c); !bytes.Equal(again, b) {
		t.Fatal("accepted chunk is not canonical: re-encoding differs")
	}
	// The same payload in parts (cut where its bytes say, empty parts included) encodes
	// to the same bytes.
	c.Parts, c.Payload = splitParts(payload), nil
	if err := checkChunk(&c); err != nil {
		t.Fatalf("accepted chunk in %d parts fails the encoder's checks: %v", len(c.Parts), err)
	}
	if again := appendChunk(nil, &c); !bytes.Equal(again, b) {
		t.Fatalf("accepted chunk in %d parts re-encodes differently", len(c.Parts))
	}
}

// splitParts cuts p into parts whose lengths its own bytes pick (1 to 31 each, an empty
// part before each part its byte gives 0): deterministic for a fuzz input, varied across
// inputs.
func splitParts(p []byte) [][]byte {
	var parts [][]byte
	for i := 0; len(p) > 0; i++ {
		n := int(p[(i*7)%len(p)] & 31)
		if n == 0 {
			parts = append(parts, []byte{})
			n = 1
		}
		n = min(n, len(p))
		parts = append(parts, p[:n:n])
		p = p[n:]
	}
	return append(parts, nil)
}

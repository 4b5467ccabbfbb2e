package walfmt

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
)

// inParts returns chunks with each payload given in parts instead: cut into three (the
// middle one empty when the payload is short) with an empty part first and last.
func inParts(chunks []Chunk) []Chunk {
	out := slices.Clone(chunks)
	for i := range out {
		p := out[i].Payload
		a, b := len(p)/3, 2*len(p)/3
		out[i].Parts = [][]byte{{}, p[:a], p[a:b], nil, p[b:], {}}
		out[i].Payload = nil
	}
	return out
}

// TestGoldenParts: every golden object, v1 and v2, encoded from payloads in parts is the
// golden file byte for byte, with the same refs as from whole payloads.
func TestGoldenParts(t *testing.T) {
	cases := append(goldenCases(), v2Case())
	for _, g := range cases {
		t.Run(g.file, func(t *testing.T) {
			var want []byte
			if g.file == "encrypted.wal" {
				want = readGoldenV2(t)
			} else {
				want = readGolden(t, g.file)
			}
			_, wantRefs := g.encode(t)
			obj, refs, err := AppendObject(nil, g.header, inParts(g.chunks))
			if err != nil {
				t.Fatalf("AppendObject from parts: %v", err)
			}
			if !bytes.Equal(obj, want) {
				t.Fatalf("object from parts (%d bytes) differs from the golden file (%d bytes)", len(obj), len(want))
			}
			if !slices.Equal(refs, wantRefs) {
				t.Fatalf("refs from parts %+v, from whole payloads %+v", refs, wantRefs)
			}
		})
	}
}

// TestPartsEqualJoined: chunks in parts of every shape (one part, many, empty ones, a
// part per byte) encode to what their joined payloads do, appended after existing bytes.
func TestPartsEqualJoined(t *testing.T) {
	h, _ := benchObject(1)
	payload := pattern(3, 1000)
	splits := map[string][][]byte{
		"one":      {payload},
		"two":      {payload[:1], payload[1:]},
		"empties":  {nil, payload[:500], {}, payload[500:], nil},
		"per-byte": {},
	}
	for i := range payload {
		splits["per-byte"] = append(splits["per-byte"], payload[i:i+1])
	}
	for name, parts := range splits {
		t.Run(name, func(t *testing.T) {
			whole := []Chunk{{StreamID: 1, Encoding: EncodingKafka, Records: 7, MaxTimestamp: 9, Payload: slices.Concat(parts...)},
				{StreamID: 1, Partition: 1, Encoding: EncodingKafka, Records: 1, Payload: []byte{1}}}
			split := slices.Clone(whole)
			split[0].Payload, split[0].Parts = nil, parts
			prefix := []byte("prefix")
			want, wantRefs, err := AppendObject(slices.Clone(prefix), h, whole)
			if err != nil {
				t.Fatal(err)
			}
			got, refs, err := AppendObject(slices.Clone(prefix), h, split)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || !slices.Equal(refs, wantRefs) {
				t.Fatalf("object from %d parts differs from the joined payload's", len(parts))
			}
		})
	}
}

// TestPartCRCsEqualRead: parts given with their checksums (the writer's produce path)
// encode byte for byte what the parts alone do: every golden object, and every split of
// TestPartsEqualJoined's payload.
func TestPartCRCsEqualRead(t *testing.T) {
	withSums := func(chunks []Chunk) []Chunk {
		out := slices.Clone(chunks)
		for i := range out {
			out[i].PartCRCs = nil
			for _, p := range out[i].Parts {
				out[i].PartCRCs = append(out[i].PartCRCs, crc32.Checksum(p, castagnoli))
			}
		}
		return out
	}
	for _, g := range goldenCases() {
		parts := inParts(g.chunks)
		want, _, err := AppendObject(nil, g.header, parts)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := AppendObject(nil, g.header, withSums(parts))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !bytes.Equal(got, readGolden(t, g.file)) {
			t.Fatalf("%s: the object from parts with their checksums differs from the golden file", g.file)
		}
	}
	h, _ := benchObject(1)
	payload := pattern(3, 1000)
	for _, parts := range [][][]byte{{payload}, {nil, payload[:1], {}, payload[1:999], payload[999:], nil}} {
		c := []Chunk{{StreamID: 1, Encoding: EncodingKafka, Records: 7, MaxTimestamp: 9, Parts: parts}}
		want, _, err := AppendObject(nil, h, c)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := AppendObject(nil, h, withSums(c))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d parts with their checksums encode differently", len(parts))
		}
	}
}

// TestPartsInvalid: a chunk with both a payload and parts, or with parts adding up to
// nothing, is refused by name and dst is left as it was.
func TestPartsInvalid(t *testing.T) {
	h, _ := benchObject(1)
	for name, c := range map[string]Chunk{
		"both":        {Payload: []byte{1}, Parts: [][]byte{{2}}},
		"empty parts": {Parts: [][]byte{{}, nil}},
		"no parts":    {Parts: [][]byte{}},
		"part sums":   {Parts: [][]byte{{1}, {2}}, PartCRCs: []uint32{0}},
	} {
		t.Run(name, func(t *testing.T) {
			c.StreamID, c.Encoding, c.Records = 1, EncodingKafka, 1
			dst := []byte("keep")
			out, _, err := AppendObject(dst, h, []Chunk{c})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
			t.Log(err)
		})
	}
}

// BenchmarkAppendObjectParts: an 8 MiB object of 8 chunks, each built from 2 requests,
// as the writer builds it: "joined" joins each chunk's parts and encodes the joined
// payloads (the copy the writer made before chunks could be given in parts), "parts"
// encodes the parts. copied-B/op counts the payload bytes memmoved per object.
func BenchmarkAppendObjectParts(b *testing.B) {
	h, whole := benchObject(16)
	chunks := make([]Chunk, 8)
	var parts [][][]byte
	for i := range chunks {
		chunks[i] = whole[2*i]
		chunks[i].Partition = int32(i)
		chunks[i].Payload = nil
		parts = append(parts, [][]byte{whole[2*i].Payload, whole[2*i+1].Payload})
	}
	payload := 0
	for _, c := range whole {
		payload += len(c.Payload)
	}
	for _, mode := range []string{"joined", "parts"} {
		b.Run(fmt.Sprintf("mode=%s", mode), func(b *testing.B) {
			buf := make([]byte, 0, payload+4096)
			b.SetBytes(int64(payload))
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				for i := range chunks {
					if mode == "joined" {
						chunks[i].Payload, chunks[i].Parts = slices.Concat(parts[i]...), nil
					} else {
						chunks[i].Payload, chunks[i].Parts = nil, parts[i]
					}
				}
				var err error
				if buf, _, err = AppendObject(buf[:0], h, chunks); err != nil {
					b.Fatal(err)
				}
			}
			copied := payload
			if mode == "joined" {
				copied *= 2
			}
			b.ReportMetric(float64(copied), "copied-B/op")
			reportCPURate(b, start, int64(payload))
		})
	}
}

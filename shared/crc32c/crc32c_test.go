package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var table = crc32.MakeTable(crc32.Castagnoli)

func TestCombineMatchesChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, lens := range [][2]int{{0, 0}, {0, 7}, {7, 0}, {1, 1}, {21, 1000}, {1 << 16, 3}, {5, 1 << 20}, {8 << 20, 1}} {
		a, b := make([]byte, lens[0]), make([]byte, lens[1])
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := crc32.Checksum(append(append([]byte{}, a...), b...), table)
		if got := Combine(crc32.Checksum(a, table), crc32.Checksum(b, table), len(b)); got != want {
			t.Errorf("lengths %v: Combine 0x%08x, checksum of the concatenation 0x%08x", lens, got, want)
		}
	}
}

// TestCombineGolden: known CRC-32C values (RFC 3720's "123456789" check value 0xe3069283).
func TestCombineGolden(t *testing.T) {
	if got := Combine(crc32.Checksum([]byte("1234"), table), crc32.Checksum([]byte("56789"), table), 5); got != 0xe3069283 {
		t.Fatalf("Combine of 1234 and 56789: 0x%08x, want 0xe3069283", got)
	}
	if got := Combine(0, 0xe3069283, 9); got != 0xe3069283 {
		t.Fatalf("Combine with nothing before: 0x%08x", got)
	}
}

func FuzzCombine(f *testing.F) {
	f.Add([]byte("1234"), []byte("56789"))
	f.Add([]byte{}, []byte{0})
	f.Add([]byte{0xff, 0, 0xff}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := crc32.Checksum(append(append([]byte{}, a...), b...), table)
		if got := Combine(crc32.Checksum(a, table), crc32.Checksum(b, table), len(b)); got != want {
			t.Fatalf("Combine 0x%08x, checksum of the concatenation 0x%08x (lengths %d, %d)", got, want, len(a), len(b))
		}
	})
}

func BenchmarkCombine(b *testing.B) {
	for b.Loop() {
		Combine(0x12345678, 0x9abcdef0, 512<<10)
	}
}

package envelope

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

func testKEK(t testing.TB) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

var testChunk = ChunkID{Object: "wal/standard/n1/01JZ.wal", Index: 3, StreamID: 7, Partition: 2}

func TestSealOpen(t *testing.T) {
	kek := testKEK(t)
	pt := []byte("a RecordBatch v2 chunk")
	sealed, err := Seal(kek, "01KEY", testChunk, pt)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != len(pt)+len("01KEY")+Overhead {
		t.Fatalf("sealed %d bytes, want %d", len(sealed), len(pt)+len("01KEY")+Overhead)
	}
	if sealed[0] != 1 || sealed[1] != 5 || string(sealed[2:7]) != "01KEY" {
		t.Fatalf("header % x", sealed[:7])
	}
	if bytes.Contains(sealed, pt) {
		t.Fatal("plaintext visible in the sealed chunk")
	}
	if id, err := KeyID(sealed); err != nil || id != "01KEY" {
		t.Fatalf("KeyID %q %v", id, err)
	}
	got, err := Open(kek, testChunk, sealed)
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("open: %q %v", got, err)
	}
	// Two seals of one chunk differ (fresh data key and nonces).
	again, _ := Seal(kek, "01KEY", testChunk, pt)
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals are identical")
	}
}

// TestTamper: every flipped byte, a chunk moved to another object, position, stream or
// partition, a wrong key, a truncation: refused, nothing returned.
func TestTamper(t *testing.T) {
	kek := testKEK(t)
	sealed, err := Seal(kek, "01KEY", testChunk, []byte("secret records"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x40
		if pt, err := Open(kek, testChunk, bad); !errors.Is(err, ErrSealed) || pt != nil {
			t.Fatalf("byte %d flipped: %q %v", i, pt, err)
		}
	}
	moved := map[string]ChunkID{
		"other object":    {Object: "wal/standard/n1/01JY.wal", Index: 3, StreamID: 7, Partition: 2},
		"other position":  {Object: testChunk.Object, Index: 4, StreamID: 7, Partition: 2},
		"other stream":    {Object: testChunk.Object, Index: 3, StreamID: 8, Partition: 2},
		"other partition": {Object: testChunk.Object, Index: 3, StreamID: 7, Partition: 1},
	}
	for name, id := range moved {
		if pt, err := Open(kek, id, sealed); !errors.Is(err, ErrSealed) || pt != nil {
			t.Errorf("%s: %q %v", name, pt, err)
		}
	}
	if _, err := Open(testKEK(t), testChunk, sealed); !errors.Is(err, ErrSealed) {
		t.Errorf("wrong key: %v", err)
	}
	for _, n := range []int{0, 1, 2, 10, len(sealed) - 1} {
		if _, err := Open(kek, testChunk, sealed[:n]); !errors.Is(err, ErrSealed) {
			t.Errorf("truncated to %d: %v", n, err)
		}
	}
}

func FuzzOpen(f *testing.F) {
	kek := make([]byte, 32)
	sealed, _ := Seal(kek, "01KEY", testChunk, []byte("x"))
	f.Add(sealed)
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 255, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Only genuine seals open (forging one needs the key), and every genuine seal in
		// the corpus seals "x". (Each fuzzing process seals its own seed, with fresh nonces,
		// so the input is not compared with this process's seed.)
		if pt, err := Open(kek, testChunk, b); err == nil && !bytes.Equal(pt, []byte("x")) {
			t.Fatalf("forged input opened to %q", pt)
		}
		KeyID(b)
	})
}

// BenchmarkSealOpen: sealing and opening a 1 MiB chunk (AES-256-GCM, one data key each).
func BenchmarkSealOpen(b *testing.B) {
	kek := bytes.Repeat([]byte{1}, 32)
	pt := bytes.Repeat([]byte("loam"), 1<<18)
	id := ChunkID{Object: "wal/standard/n1/x.wal", Index: 3, StreamID: 9, Partition: 1}
	sealed, err := Seal(kek, "01JDQ8ZK3M4N5P6Q7R8S9T0V1W", id, pt)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("seal", func(b *testing.B) {
		b.SetBytes(int64(len(pt)))
		for range b.N {
			if _, err := Seal(kek, "01JDQ8ZK3M4N5P6Q7R8S9T0V1W", id, pt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(len(pt)))
		for range b.N {
			if _, err := Open(kek, id, sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

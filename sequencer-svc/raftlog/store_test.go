package raftlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func sampleLog() *raft.Log {
	return &raft.Log{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte("command bytes"),
		Extensions: []byte{1, 2}, AppendedAt: time.Unix(1_800_000_000, 123456789)}
}

func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if i, _ := s.LastIndex(); i != 0 {
		t.Fatalf("empty last index %d", i)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 5 || last != 10 {
		t.Fatalf("first %d last %d", first, last)
	}
	var l raft.Log
	if err := s.GetLog(3, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry: %v", err)
	}
	if err := s.GetLog(6, &l); err != nil || l.Index != 6 || !bytes.Equal(l.Data, []byte{6}) {
		t.Fatalf("%+v %v", l, err)
	}
	if v, err := s.GetUint64([]byte("term")); err != nil || v != 0 {
		t.Fatalf("missing uint64: %d %v", v, err)
	}
	if _, err := s.Get([]byte("x")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v", err)
	}
	if err := s.SetUint64([]byte("term"), 42); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _ := s.GetUint64([]byte("term")); v != 42 {
		t.Fatalf("term after reopen %d", v)
	}
	if last, _ := s.LastIndex(); last != 10 {
		t.Fatalf("last after reopen %d", last)
	}
}

// TestGoldenEntry pins entry layout v1: testdata/v1/entry.bin was written once and is
// never regenerated.
func TestGoldenEntry(t *testing.T) {
	const golden = "testdata/v1/entry.bin"
	want := AppendEntry(nil, sampleLog())
	got, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", want, got)
	}
	var l raft.Log
	if err := DecodeEntry(got, &l); err != nil {
		t.Fatal(err)
	}
	exp := sampleLog()
	exp.Index = 0
	if !reflect.DeepEqual(&l, exp) {
		t.Fatalf("decoded %+v", l)
	}
	bad := bytes.Clone(got)
	bad[5] ^= 0x10
	if err := DecodeEntry(bad, &l); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped bit: %v", err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(AppendEntry(nil, sampleLog()))
	f.Add(AppendEntry(nil, &raft.Log{}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := DecodeEntry(b, &l); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		// Invariant: what decodes re-encodes to the same bytes.
		if got := AppendEntry(nil, &l); !bytes.Equal(got, b) {
			t.Fatalf("re-encode differs:\n%x\n%x", got, b)
		}
	})
}

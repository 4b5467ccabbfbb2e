package segfmt

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode, as they are and again with every CRC
// recomputed (so that mutations reach the checks behind the CRCs). Invariants: Decode
// never panics and fails only with corruption or unsupported-version/encoding errors;
// whatever it accepts is canonical (writing its header, batches and optional sections
// again reproduces the input byte for byte) and ReadInfo and ReadInfoAt read the same
// Info from it.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenCases() {
		obj, _ := g.encode(f)
		f.Add(obj)
		f.Add(obj[:len(obj)/2])
	}
	for _, g := range arrowGoldenCases() {
		obj, _ := g.encode(f)
		f.Add(obj)
	}
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, obj []byte) {
		checkDecode(t, obj)
		resealed := bytes.Clone(obj)
		reseal(resealed)
		checkDecode(t, resealed)
	})
}

func checkDecode(t *testing.T, obj []byte) {
	t.Helper()
	info, err := Decode(obj)
	if err != nil {
		if info != nil {
			t.Fatal("Decode returned an Info with an error")
		}
		mustDecodeFail(t, "Decode", err)
		return
	}
	w, err := NewWriter(info.Header)
	if err != nil {
		t.Fatalf("NewWriter with an accepted header: %v", err)
	}
	if info.Arrow != nil {
		readdArrow(t, w, obj, info)
	}
	for i, r := range info.Batches {
		if info.Arrow != nil {
			break
		}
		if err := w.Add(obj[r.Offset : r.Offset+int64(r.Length)]); err != nil {
			t.Fatalf("Add batch %d of an accepted object: %v", i, err)
		}
	}
	again, winfo, err := w.finish(info.extra)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if !bytes.Equal(again, obj) || !equalInfo(&winfo, info) {
		t.Fatal("accepted object is not canonical: writing it again differs")
	}
	checkReaders(t, obj, info)
}

// FuzzReadInfo feeds arbitrary bytes, as a whole object, to ReadInfo (the trailer and
// index parse), as they are and with every CRC recomputed. Invariants: no panic, failures
// are corruption or unsupported; an accepted index is canonical (encoding the Info's index
// and trailer again reproduces the object from the index offset on), internally
// consistent (batches tile the data region, offsets increase within the header's range)
// and ReadInfoAt reads the same.
func FuzzReadInfo(f *testing.F) {
	for _, g := range goldenCases() {
		obj, info := g.encode(f)
		f.Add(obj)
		f.Add(obj[info.IndexOffset()-1:])
		f.Add(obj[:len(obj)-1])
	}
	for _, g := range arrowGoldenCases() {
		obj, _ := g.encode(f)
		f.Add(obj)
	}
	f.Add(make([]byte, HeaderSize+minIndexLen+TrailerSize+61))
	f.Fuzz(func(t *testing.T, obj []byte) {
		checkReadInfo(t, obj)
		resealed := bytes.Clone(obj)
		reseal(resealed)
		checkReadInfo(t, resealed)
	})
}

func checkReadInfo(t *testing.T, obj []byte) {
	t.Helper()
	info, err := ReadInfo(t.Context(), memReader{"k": obj}, "k", int64(len(obj)))
	if err != nil {
		if info != nil {
			t.Fatal("ReadInfo returned an Info with an error")
		}
		mustDecodeFail(t, "ReadInfo", err)
		return
	}
	if info.Size != int64(len(obj)) {
		t.Fatalf("Size %d of a %d-byte object", info.Size, len(obj))
	}
	again := appendIndexAndTrailer(bytes.Clone(obj[:info.IndexOffset()]), info)
	if !bytes.Equal(again, obj) {
		t.Fatal("accepted index is not canonical: encoding it again differs")
	}
	next, prevEnd := info.DataOffset, info.Header.BaseOffset
	var offsets int64
	for i, r := range info.Batches {
		if r.Offset != next || r.BaseOffset < prevEnd || r.Count < 1 || r.End() > info.Header.EndOffset {
			t.Fatalf("batch %d %+v breaks the index invariants", i, r)
		}
		next, prevEnd = r.Offset+int64(r.Length), r.End()
		offsets += r.Count
	}
	if next != info.IndexOffset() || offsets != info.Header.OffsetCount || int64(len(info.Batches)) != info.Header.BatchCount {
		t.Fatal("batches do not add up to the header")
	}
	ra, err := ReadInfoAt(t.Context(), memReader{"k": obj}, "k", info.IndexOffset())
	if err != nil || !equalInfo(ra, info) {
		t.Fatalf("ReadInfoAt disagrees with ReadInfo: %v", err)
	}
}

// checkReaders checks that ReadInfo and ReadInfoAt agree with Decode on obj.
func checkReaders(t *testing.T, obj []byte, info *Info) {
	t.Helper()
	rr := memReader{"k": obj}
	ri, err := ReadInfo(t.Context(), rr, "k", int64(len(obj)))
	if err != nil || !equalInfo(ri, info) {
		t.Fatalf("ReadInfo disagrees with Decode: %v", err)
	}
	ra, err := ReadInfoAt(t.Context(), rr, "k", info.IndexOffset())
	if err != nil || !equalInfo(ra, info) {
		t.Fatalf("ReadInfoAt disagrees with Decode: %v", err)
	}
}

package segfmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Arrow segments (encoding 2). The data region is groups back to back instead of Kafka
// batches: a group holds consecutive rows (one offset each) of one schema version, as
// one column chunk per top-level column of that schema, back to back in schema order
// (shared/arrowenc writes and reads column chunks: the columns' Arrow buffers as the
// record batches held them). Each group is one entry of the batch index (its offsets,
// max timestamp, byte range and CRC32C, as for a Kafka batch); the column-ranges section
// adds, per group, its schema id and each column chunk's length and CRC32C, so that a
// reader of some columns range-reads only their chunks and checks each alone, and the
// schemas themselves (an Arrow IPC stream holding only the schema), so the segment alone
// rebuilds valid Arrow IPC.
//
// Column-ranges section (type 2, flags 1 "optional"; exactly once in an arrow segment,
// after the batch index):
//
//	off  size  field
//	0    1     section version = 1
//	1    3     reserved, 0
//	4    4     schema count S (>= 1)
//	8    ...   S schemas, ids strictly increasing: 4 schema id (>= 1), 4 length n (>= 1), n bytes
//	...  4     group count, equal to the header's batch count
//	...  ...   per group: 4 schema id (one of the S), 4 column count C (>= 1),
//	           C times: 4 length, 4 CRC32C of the column chunk's bytes
//
// A group's column chunks tile it: column c starts where column c-1 ends, the first at
// the group's byte offset, and their lengths add up to the group's length.
const ColumnRangesVersion = 1

// minDataLen is the smallest data region of any encoding (one 8-byte arrow group).
const minDataLen = 8

// ArrowGroup is one group as Writer.AddGroup takes it.
type ArrowGroup struct {
	BaseOffset   int64 // offset of the first row
	Rows         int64 // rows, one offset each (>= 1)
	MinTimestamp int64 // ms
	MaxTimestamp int64 // ms
	SchemaID     uint32
	Columns      [][]byte // one column chunk per top-level column, in schema order
}

// ArrowSchema is one schema version an arrow segment's groups use.
type ArrowSchema struct {
	ID  uint32
	IPC []byte // an Arrow IPC stream holding only the schema message
}

// ColumnRange locates one column chunk: bytes [Offset, Offset+Length) of the object.
type ColumnRange struct {
	Offset int64
	Length int64
	CRC    uint32
}

// ArrowGroupRef is a group's entry of the column-ranges section; its offsets and byte
// range are the batch index entry of the same position.
type ArrowGroupRef struct {
	SchemaID uint32
	Columns  []ColumnRange
}

// ArrowIndex is an arrow segment's column-ranges section.
type ArrowIndex struct {
	Schemas []ArrowSchema // by increasing id
	Groups  []ArrowGroupRef
}

// Schema returns the schema of id, or nil.
func (a *ArrowIndex) Schema(id uint32) []byte {
	i, ok := slices.BinarySearchFunc(a.Schemas, id, func(s ArrowSchema, id uint32) int { return int64cmp(int64(s.ID), int64(id)) })
	if !ok {
		return nil
	}
	return a.Schemas[i].IPC
}

func int64cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AddSchema registers schema version id for the groups that follow: the IPC bytes of
// its schema. Adding an id again with the same bytes does nothing; with other bytes it
// fails with ErrInvalid.
func (w *Writer) AddSchema(id uint32, ipc []byte) error {
	switch {
	case w.done:
		return fmt.Errorf("segfmt: add schema: writer already finished: %w", ErrInvalid)
	case w.h.Encoding != EncodingArrow:
		return fmt.Errorf("segfmt: add schema: a %v segment has no schemas: %w", w.h.Encoding, ErrInvalid)
	case id == 0 || len(ipc) == 0:
		return fmt.Errorf("segfmt: add schema: id %d with %d bytes (want id >= 1 and bytes): %w", id, len(ipc), ErrInvalid)
	}
	for _, s := range w.schemas {
		if s.ID == id {
			if !bytes.Equal(s.IPC, ipc) {
				return fmt.Errorf("segfmt: add schema %d: added before with other bytes: %w", id, ErrInvalid)
			}
			return nil
		}
	}
	w.schemas = append(w.schemas, ArrowSchema{ID: id, IPC: bytes.Clone(ipc)})
	return nil
}

// AddGroup appends one group of an arrow segment: its column chunks back to back. Its
// schema must have been added (AddSchema); it must start after the previous group's end
// and lie within the writer's offset range if one was given. A rejected group fails with
// ErrInvalid and leaves the writer as it was.
func (w *Writer) AddGroup(g ArrowGroup) error {
	var n int64
	for _, c := range g.Columns {
		n += int64(len(c))
	}
	k := len(w.batches)
	switch {
	case w.done:
		return fmt.Errorf("segfmt: add group: writer already finished: %w", ErrInvalid)
	case w.h.Encoding != EncodingArrow:
		return fmt.Errorf("segfmt: add group: a %v segment holds batches (Add): %w", w.h.Encoding, ErrInvalid)
	case !slices.ContainsFunc(w.schemas, func(s ArrowSchema) bool { return s.ID == g.SchemaID }):
		return fmt.Errorf("segfmt: add group %d: schema %d was not added: %w", k, g.SchemaID, ErrInvalid)
	case len(g.Columns) == 0:
		return fmt.Errorf("segfmt: add group %d: no columns: %w", k, ErrInvalid)
	case n < minDataLen || n > math.MaxInt32:
		return fmt.Errorf("segfmt: add group %d: %d bytes (want %d..%d): %w", k, n, minDataLen, math.MaxInt32, ErrInvalid)
	case g.Rows < 1 || g.Rows > math.MaxUint32:
		return fmt.Errorf("segfmt: add group %d: %d rows: %w", k, g.Rows, ErrInvalid)
	case g.BaseOffset < 0 || g.BaseOffset > math.MaxInt64-g.Rows:
		return fmt.Errorf("segfmt: add group %d: base offset %d: %w", k, g.BaseOffset, ErrInvalid)
	case k > 0 && g.BaseOffset < w.prevEnd:
		return fmt.Errorf("segfmt: add group %d: base offset %d is before the previous group's end %d: %w", k, g.BaseOffset, w.prevEnd, ErrInvalid)
	case w.explicit && (g.BaseOffset < w.h.BaseOffset || g.BaseOffset+g.Rows > w.h.EndOffset):
		return fmt.Errorf("segfmt: add group %d: offsets [%d, %d) outside the segment's range [%d, %d): %w",
			k, g.BaseOffset, g.BaseOffset+g.Rows, w.h.BaseOffset, w.h.EndOffset, ErrInvalid)
	case g.MinTimestamp > g.MaxTimestamp:
		return fmt.Errorf("segfmt: add group %d: min timestamp %d after max %d: %w", k, g.MinTimestamp, g.MaxTimestamp, ErrInvalid)
	case k == math.MaxUint32:
		return fmt.Errorf("segfmt: add group: segment already holds %d groups: %w", k, ErrInvalid)
	}
	ref := BatchRef{Offset: int64(len(w.buf)), Length: int32(n), BaseOffset: g.BaseOffset, Count: g.Rows, MaxTimestamp: g.MaxTimestamp}
	gr := ArrowGroupRef{SchemaID: g.SchemaID, Columns: make([]ColumnRange, len(g.Columns))}
	off := ref.Offset
	for i, c := range g.Columns {
		gr.Columns[i] = ColumnRange{Offset: off, Length: int64(len(c)), CRC: crc32.Checksum(c, castagnoli)}
		off += int64(len(c))
		w.buf = append(w.buf, c...)
	}
	ref.CRC = crc32.Checksum(w.buf[ref.Offset:], castagnoli)
	w.batches = append(w.batches, ref)
	w.groups = append(w.groups, gr)
	w.prevEnd = ref.End()
	w.offsets += g.Rows
	w.records += g.Rows
	w.minTS = min(w.minTS, g.MinTimestamp)
	w.maxTS = max(w.maxTS, g.MaxTimestamp)
	return nil
}

// arrowSectionBody appends the column-ranges section body of a to b.
func arrowSectionBody(b []byte, a *ArrowIndex) []byte {
	be := binary.BigEndian
	b = append(b, ColumnRangesVersion, 0, 0, 0)
	b = be.AppendUint32(b, uint32(len(a.Schemas)))
	for _, s := range a.Schemas {
		b = be.AppendUint32(b, s.ID)
		b = be.AppendUint32(b, uint32(len(s.IPC)))
		b = append(b, s.IPC...)
	}
	b = be.AppendUint32(b, uint32(len(a.Groups)))
	for _, g := range a.Groups {
		b = be.AppendUint32(b, g.SchemaID)
		b = be.AppendUint32(b, uint32(len(g.Columns)))
		for _, c := range g.Columns {
			b = be.AppendUint32(b, uint32(c.Length))
			b = be.AppendUint32(b, c.CRC)
		}
	}
	return b
}

// decodeColumnRanges decodes an arrow segment's column-ranges section body, at object
// offset at, against the batch index already decoded into i.Batches.
func (i *Info) decodeColumnRanges(body []byte, at int64) error {
	r := reader{b: body, base: at}
	v := r.u8("column ranges version")
	reserved := r.take(3, "column ranges reserved")
	if r.err != nil {
		return r.err
	}
	if v != ColumnRangesVersion {
		return fmt.Errorf("column ranges at offset %d: version %d, this reader supports %d: %w", at, v, ColumnRangesVersion, ErrUnsupportedVersion)
	}
	if reserved[0]|reserved[1]|reserved[2] != 0 {
		return bad(ErrCorrupt, "column ranges at offset %d: reserved bytes set", at)
	}
	ns := r.u32("schema count")
	if r.err != nil {
		return r.err
	}
	if ns < 1 || int64(ns) > int64(len(body))/9 {
		return bad(ErrCorrupt, "column ranges at offset %d: %d schemas in %d bytes", at, ns, len(body))
	}
	a := &ArrowIndex{Schemas: make([]ArrowSchema, 0, ns)}
	for k := uint32(0); k < ns; k++ {
		sat := r.pos()
		id := r.u32("schema id")
		n := r.u32("schema length")
		p := r.take(int(min(n, math.MaxInt32)), "schema")
		if r.err != nil {
			return r.err
		}
		switch {
		case id == 0 || n == 0:
			return bad(ErrCorrupt, "schema at offset %d: id %d, %d bytes (want >= 1 each)", sat, id, n)
		case k > 0 && id <= a.Schemas[k-1].ID:
			return bad(ErrCorrupt, "schema at offset %d: id %d after %d (ids strictly increase)", sat, id, a.Schemas[k-1].ID)
		}
		a.Schemas = append(a.Schemas, ArrowSchema{ID: id, IPC: bytes.Clone(p)})
	}
	ng := r.u32("group count")
	if r.err != nil {
		return r.err
	}
	if int64(ng) != int64(len(i.Batches)) {
		return bad(ErrCorrupt, "column ranges at offset %d: %d groups, the batch index has %d", at, ng, len(i.Batches))
	}
	a.Groups = make([]ArrowGroupRef, ng)
	for k := range a.Groups {
		gat := r.pos()
		id := r.u32("group schema id")
		nc := r.u32("column count")
		if r.err != nil {
			return r.err
		}
		if a.Schema(id) == nil {
			return bad(ErrCorrupt, "group %d at offset %d: schema %d is not in the section", k, gat, id)
		}
		if nc < 1 || int64(nc) > int64(len(body)-r.off)/8 {
			return bad(ErrCorrupt, "group %d at offset %d: %d columns in the %d bytes left", k, gat, nc, len(body)-r.off)
		}
		ref := i.Batches[k]
		g := ArrowGroupRef{SchemaID: id, Columns: make([]ColumnRange, nc)}
		off := ref.Offset
		for c := range g.Columns {
			n := int64(r.u32("column length"))
			crc := r.u32("column crc32c")
			if r.err != nil {
				return r.err
			}
			if n > ref.Offset+int64(ref.Length)-off {
				return bad(ErrCorrupt, "group %d at offset %d: column %d of %d bytes overruns the group's %d", k, gat, c, n, ref.Length)
			}
			g.Columns[c] = ColumnRange{Offset: off, Length: n, CRC: crc}
			off += n
		}
		if off != ref.Offset+int64(ref.Length) {
			return bad(ErrCorrupt, "group %d at offset %d: columns end at %d, the group at %d", k, gat, off, ref.Offset+int64(ref.Length))
		}
		a.Groups[k] = g
	}
	if r.off != len(body) {
		return bad(ErrCorrupt, "column ranges at offset %d: %d bytes after the last group", at, len(body)-r.off)
	}
	for k, ref := range i.Batches {
		if ref.MaxTimestamp < i.Header.MinTimestamp {
			return bad(ErrCorrupt, "group %d: max timestamp %d before the segment's min timestamp %d", k, ref.MaxTimestamp, i.Header.MinTimestamp)
		}
	}
	i.Arrow = a
	return nil
}

// checkGroups checks b as the bytes of groups [from, to) of an arrow segment: each
// group's CRC32C from the batch index and each column chunk's from the column ranges.
func (i *Info) checkGroups(from, to int, b []byte) error {
	off, n := i.Span(from, to)
	if int64(len(b)) != n {
		kind := ErrTruncated
		if int64(len(b)) > n {
			kind = ErrCorrupt
		}
		return bad(kind, "groups at offset %d: %d bytes, the index says %d", off, len(b), n)
	}
	for k := from; k < to; k++ {
		ref := i.Batches[k]
		raw := b[ref.Offset-off : ref.Offset-off+int64(ref.Length)]
		if sum := crc32.Checksum(raw, castagnoli); sum != ref.CRC {
			return bad(ErrBadCRC, "group %d at offset %d: crc32c %#08x in the index, computed %#08x", k, ref.Offset, ref.CRC, sum)
		}
		for c, cr := range i.Arrow.Groups[k].Columns {
			if sum := crc32.Checksum(b[cr.Offset-off:cr.Offset-off+cr.Length], castagnoli); sum != cr.CRC {
				return bad(ErrBadCRC, "group %d column %d at offset %d: crc32c %#08x in the column ranges, computed %#08x", k, c, cr.Offset, cr.CRC, sum)
			}
		}
	}
	return nil
}

// CheckColumns validates b as the bytes of columns [from, to) of group g of an arrow
// segment, as read with one range read of ColumnSpan(g, from, to): its length and each
// column chunk's CRC32C. It fails with ErrInvalid when the segment is not an arrow
// segment or the positions are out of range, and with a corruption error otherwise.
func (i *Info) CheckColumns(g, from, to int, b []byte) error {
	if i.Arrow == nil || g < 0 || g >= len(i.Arrow.Groups) || from < 0 || from >= to || to > len(i.Arrow.Groups[g].Columns) {
		return fmt.Errorf("segfmt: check columns [%d, %d) of group %d: %w", from, to, g, ErrInvalid)
	}
	cols := i.Arrow.Groups[g].Columns[from:to]
	off, n := i.ColumnSpan(g, from, to)
	if int64(len(b)) != n {
		return fmt.Errorf("segfmt: check columns [%d, %d) of group %d: %w", from, to, g,
			bad(ErrTruncated, "columns at offset %d: %d bytes, the index says %d", off, len(b), n))
	}
	for c, cr := range cols {
		if sum := crc32.Checksum(b[cr.Offset-off:cr.Offset-off+cr.Length], castagnoli); sum != cr.CRC {
			return fmt.Errorf("segfmt: check columns of group %d: %w", g,
				bad(ErrBadCRC, "column %d at offset %d: crc32c %#08x in the column ranges, computed %#08x", from+c, cr.Offset, cr.CRC, sum))
		}
	}
	return nil
}

// ColumnSpan returns the byte range [off, off+n) of the object holding columns [from,
// to) of group g of an arrow segment (adjacent columns are contiguous: one range read).
// It panics on positions out of range, like slicing.
func (i *Info) ColumnSpan(g, from, to int) (off, n int64) {
	cols := i.Arrow.Groups[g].Columns[from:to]
	if len(cols) == 0 {
		return i.Batches[g].Offset, 0
	}
	last := cols[len(cols)-1]
	return cols[0].Offset, last.Offset + last.Length - cols[0].Offset
}

package segmenter

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/segfmt"
)

// Arrow segments. The chunks of an arrow stream's partition hold arrow frames (one Arrow
// IPC stream each, shared/arrowenc); a segment regroups their record batches into groups
// of about ArrowGroupBytes of one schema version each, and stores every group column by
// column: each column's Arrow buffers of all the group's batches, concatenated as the IPC
// batches held them (arrowenc.AppendColumnChunk), so no value is re-encoded and a read of
// k columns range-reads k column chunks of a group (adjacent ones as one range). The
// schemas go into the segment's column-ranges section, so the segment alone rebuilds
// valid Arrow IPC.

// ArrowGroupBytes is about how many bytes of column data an arrow segment's group holds:
// the unit of a full read, as BlockSize is of a kafka segment's reads. A group is cut at
// a record batch boundary once it reaches this, and at every schema change.
const ArrowGroupBytes = 1 << 20

// arrowGroupBytes is ArrowGroupBytes; tests lower it.
var arrowGroupBytes int64 = ArrowGroupBytes

// arrowSegment builds one arrow segment from a run's chunks. Memory: the segment being
// built plus the group being gathered (about ArrowGroupBytes and one record batch, whose
// buffers alias the chunk they were read from).
type arrowSegment struct {
	w       *segfmt.Writer
	p       coord.Partition
	schemas map[uint32]*arrow.Schema // schema versions added to w

	// The group being gathered.
	schemaID     uint32
	base, rows   int64
	minTS, maxTS int64
	bytes        int64
	batches      []arrow.RecordBatch
}

func newArrowSegment(w *segfmt.Writer, p coord.Partition) *arrowSegment {
	return &arrowSegment{w: w, p: p, schemas: map[uint32]*arrow.Schema{}}
}

// add takes the rows of one chunk, whose payload holds arrow frames and whose index
// entry is e.
func (a *arrowSegment) add(e meta.IndexEntry, payload []byte) error {
	frames, err := arrowenc.DecodePayload(payload)
	if err != nil {
		return fmt.Errorf("segmenter: %s [%d+%d] (%s): %w", e.Object, e.Offset, e.Length, a.p, err)
	}
	defer arrowenc.ReleaseFrames(frames)
	off := e.BaseOffset
	for _, f := range frames {
		if known, ok := a.schemas[f.SchemaID]; !ok {
			if err := a.w.AddSchema(f.SchemaID, arrowenc.SchemaBytes(f.Schema)); err != nil {
				return fmt.Errorf("segmenter: %s: %w", a.p, err)
			}
			a.schemas[f.SchemaID] = f.Schema
		} else if !known.Equal(f.Schema) {
			return fmt.Errorf("segmenter: %s at offset %d: frames of schema %d with two different schemas: %w", e.Object, off, f.SchemaID, ErrCorrupt)
		}
		if len(a.batches) > 0 && f.SchemaID != a.schemaID {
			if err := a.flush(); err != nil {
				return err
			}
		}
		for _, b := range f.Batches {
			if b.NumRows() == 0 {
				continue
			}
			if len(a.batches) == 0 {
				a.schemaID, a.base, a.rows, a.bytes = f.SchemaID, off, 0, 0
				a.minTS, a.maxTS = e.MaxTimestamp, e.MaxTimestamp
			}
			b.Retain()
			a.batches = append(a.batches, b)
			a.rows += b.NumRows()
			a.minTS, a.maxTS = min(a.minTS, e.MaxTimestamp), max(a.maxTS, e.MaxTimestamp)
			off += b.NumRows()
			for _, c := range b.Columns() {
				a.bytes += dataBytes(c.Data())
			}
			if a.bytes >= arrowGroupBytes {
				if err := a.flush(); err != nil {
					return err
				}
			}
		}
	}
	if off != e.End() {
		return fmt.Errorf("segmenter: %s [%d+%d]: frames end at offset %d, entry at %d: %w", e.Object, e.Offset, e.Length, off, e.End(), ErrCorrupt)
	}
	return nil
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}

// flush writes the group gathered as one group of the segment.
func (a *arrowSegment) flush() error {
	if len(a.batches) == 0 {
		return nil
	}
	defer func() {
		for _, b := range a.batches {
			b.Release()
		}
		a.batches = a.batches[:0]
	}()
	ncol := int(a.batches[0].NumCols())
	g := segfmt.ArrowGroup{BaseOffset: a.base, Rows: a.rows, MinTimestamp: a.minTS, MaxTimestamp: a.maxTS,
		SchemaID: a.schemaID, Columns: make([][]byte, ncol)}
	cols := make([]arrow.Array, len(a.batches))
	for c := range ncol {
		for i, b := range a.batches {
			cols[i] = b.Column(c)
		}
		chunk, err := arrowenc.AppendColumnChunk(nil, cols)
		if err != nil {
			return fmt.Errorf("segmenter: %s group at offset %d column %d: %w", a.p, a.base, c, err)
		}
		g.Columns[c] = chunk
	}
	if err := a.w.AddGroup(g); err != nil {
		return fmt.Errorf("segmenter: %s: %w", a.p, err)
	}
	return nil
}

// finish writes the last group and finishes the segment.
func (a *arrowSegment) finish() ([]byte, segfmt.Info, error) {
	if err := a.flush(); err != nil {
		return nil, segfmt.Info{}, err
	}
	return a.w.Finish()
}

// release frees a group left gathered by a failed run.
func (a *arrowSegment) release() {
	for _, b := range a.batches {
		b.Release()
	}
	a.batches = nil
}

package reader

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// ArrowRead asks ReadArrowColumns or ReadArrowFrames for rows of an arrow stream's partition.
type ArrowRead struct {
	StreamID  uint64
	Partition int32
	Offset    int64 // the first offset wanted
	// EndOffset, when above 0, stops the read at the chunk or group holding it: no chunk
	// starting at or after it is returned.
	EndOffset int64
	// Columns names the columns wanted (empty: all). Chunks read from segments hold those
	// of their schema, in schema order (a name the chunk's schema version lacks is left
	// out); chunks read from the WAL hold every column. Callers select by name
	// (arrowenc.Project).
	Columns []string
	// RecordColumns adds, to named Columns, the columns a record's key, timestamp and
	// headers come from (the key and timestamp columns its schema's metadata names, the
	// headers column): what building records of the rows needs.
	RecordColumns bool
	// MaxBytes bounds the bytes read from the bucket (at least one chunk or group is
	// returned when there is one).
	MaxBytes int64
}

// ReadArrowColumns reads the rows of an arrow stream's partition from q.Offset on: WAL
// chunks with one range GET each, segment groups with one range GET per run of adjacent
// wanted columns (so only their byte ranges are read, and a read of one column makes as
// many GETs as a read of all). Each returned chunk's payload is arrow frames
// (arrowenc.DecodePayload); a group read from a segment becomes one frame of the columns
// read. The first chunk may start before q.Offset and the last run past q.EndOffset:
// callers cut rows by offset. It does not wait: a read at the high watermark returns no
// chunks. It bypasses the chunk caches (they hold Kafka batches); segment footers come
// from the footer cache. A segment's groups are read arrowReadAhead at a time. Memory: at
// most MaxBytes plus one chunk or group, and the frames built from them.
func (r *Reader) ReadArrowColumns(ctx context.Context, q ArrowRead) (ArrowResult, error) {
	rd, err := r.readArrow(ctx, q)
	if err != nil {
		return ArrowResult{}, err
	}
	out := ArrowResult{NextOffset: rd.NextOffset, HighWatermark: rd.HighWatermark, LogStart: rd.LogStart}
	defer rd.release()
	for _, it := range rd.items {
		p := it.payload
		if it.frame != nil {
			if p, err = arrowenc.EncodePayload(it.frame.SchemaID, it.frame.Batches...); err != nil {
				return ArrowResult{}, fmt.Errorf("reader: arrow stream %d partition %d at offset %d: %w", q.StreamID, q.Partition, it.base, err)
			}
		}
		out.Chunks = append(out.Chunks, ArrowChunk{BaseOffset: it.base, Payload: p})
	}
	return out, nil
}

// ArrowRows is one chunk or segment group of rows, decoded: its rows take offsets
// BaseOffset onward.
type ArrowRows struct {
	BaseOffset int64
	Frames     []*arrowenc.Frame
}

// ArrowFrames is what ReadArrowFrames returns. Release frees the frames.
type ArrowFrames struct {
	Chunks        []ArrowRows // the first may start before the offset asked
	NextOffset    int64
	HighWatermark int64
	LogStart      int64
}

// Release frees every frame.
func (a *ArrowFrames) Release() {
	for _, c := range a.Chunks {
		arrowenc.ReleaseFrames(c.Frames)
	}
	a.Chunks = nil
}

// ReadArrowFrames is ReadArrowColumns answering decoded frames: WAL chunks decoded
// (arrowenc.DecodePayload), segment groups as built from their column chunks, never
// encoded as IPC in between. For callers that work on record batches (fetch, Flight
// DoGet). The caller releases the result.
func (r *Reader) ReadArrowFrames(ctx context.Context, q ArrowRead) (ArrowFrames, error) {
	rd, err := r.readArrow(ctx, q)
	if err != nil {
		return ArrowFrames{}, err
	}
	out := ArrowFrames{NextOffset: rd.NextOffset, HighWatermark: rd.HighWatermark, LogStart: rd.LogStart}
	for i, it := range rd.items {
		fs := []*arrowenc.Frame{it.frame}
		if it.frame == nil {
			if fs, err = arrowenc.DecodePayload(it.payload); err != nil {
				out.Release()
				rd.items = rd.items[i:]
				rd.release()
				return ArrowFrames{}, fmt.Errorf("reader: arrow stream %d partition %d at offset %d: %w", q.StreamID, q.Partition, it.base, err)
			}
		}
		out.Chunks = append(out.Chunks, ArrowRows{BaseOffset: it.base, Frames: fs})
	}
	return out, nil
}

// arrowRead is what readArrow read: WAL chunk payloads and segment groups' frames.
type arrowRead struct {
	items                               []arrowItem
	NextOffset, HighWatermark, LogStart int64
}

type arrowItem struct {
	base    int64
	payload []byte          // a WAL chunk's
	frame   *arrowenc.Frame // a segment group's
}

func (a *arrowRead) release() {
	for _, it := range a.items {
		if it.frame != nil {
			it.frame.Release()
		}
	}
}

func (r *Reader) readArrow(ctx context.Context, q ArrowRead) (*arrowRead, error) {
	entries, st, err := r.cfg.Meta.Lookup(ctx, q.StreamID, q.Partition, q.Offset, maxArrowEntries)
	if err != nil {
		return nil, err
	}
	out := &arrowRead{NextOffset: q.Offset, HighWatermark: st.HighWatermark, LogStart: st.LogStart}
	var used int64
	for _, e := range entries {
		if q.EndOffset > 0 && e.BaseOffset >= q.EndOffset {
			break
		}
		if e.Kind == meta.KindSegment {
			full, err := r.readArrowSegment(ctx, e, q, out, &used)
			if err != nil {
				out.release()
				return nil, err
			}
			if full {
				break
			}
			continue
		}
		if len(out.items) > 0 && used+e.Length > q.MaxBytes {
			break
		}
		if e.Kind != meta.KindWAL {
			out.release()
			return nil, fmt.Errorf("reader: arrow stream %d partition %d: index entry at offset %d is a %v", q.StreamID, q.Partition, e.BaseOffset, e.Kind)
		}
		payload, err := walfmt.ReadChunk(ctx, r.cfg.Bucket, e.Object, walfmt.ChunkRef{StreamID: q.StreamID, Partition: q.Partition,
			Encoding: walfmt.EncodingArrow, Records: e.Count, Offset: e.Offset, Length: e.Length})
		if err != nil {
			out.release()
			return nil, err
		}
		out.items = append(out.items, arrowItem{base: e.BaseOffset, payload: payload})
		out.NextOffset = e.End()
		used += e.Length
	}
	return out, nil
}

// arrowReadAhead is how many groups' range GETs one read of an arrow segment has in
// flight at once (the groups are planned from the footer first, within MaxBytes).
const arrowReadAhead = 4

// readArrowSegment appends the groups of segment entry e from q.Offset on to out, while
// the bytes read stay within q.MaxBytes; full reports that the budget (or EndOffset)
// stopped it before the segment's end.
func (r *Reader) readArrowSegment(ctx context.Context, e meta.IndexEntry, q ArrowRead, out *arrowRead, used *int64) (full bool, err error) {
	info, err := r.segmentInfo(ctx, e)
	if err != nil {
		return false, err
	}
	if info.Arrow == nil {
		return false, fmt.Errorf("reader: segment %s of arrow stream %d is a %v segment", e.Object, q.StreamID, info.Header.Encoding)
	}
	type job struct {
		g     int
		as    *arrow.Schema
		cols  []int
		frame *arrowenc.Frame
		err   error
	}
	var jobs []*job
	schemas := map[uint32]*arrow.Schema{}
	g, _ := info.Find(max(q.Offset, e.BaseOffset))
	for ; g < len(info.Batches) && !full; g++ {
		ref := info.Batches[g]
		if q.EndOffset > 0 && ref.BaseOffset >= q.EndOffset {
			full = true
			break
		}
		gr := info.Arrow.Groups[g]
		as := schemas[gr.SchemaID]
		if as == nil {
			if as, err = arrowenc.DecodeSchemaBytes(info.Arrow.Schema(gr.SchemaID)); err != nil {
				return false, fmt.Errorf("reader: segment %s: schema %d: %w", e.Object, gr.SchemaID, err)
			}
			schemas[gr.SchemaID] = as
		}
		if as.NumFields() != len(gr.Columns) {
			return false, fmt.Errorf("reader: segment %s group %d: %d column chunks, schema %d has %d columns: %w",
				e.Object, g, len(gr.Columns), gr.SchemaID, as.NumFields(), segfmt.ErrCorrupt)
		}
		names := q.Columns
		if q.RecordColumns && len(names) > 0 {
			names = recordColumns(as, names)
		}
		cols := wantedColumns(as, names)
		var size int64
		for _, c := range cols {
			size += gr.Columns[c].Length
		}
		if (len(out.items) > 0 || len(jobs) > 0) && *used+size > q.MaxBytes {
			full = true
			break
		}
		jobs = append(jobs, &job{g: g, as: as, cols: cols})
		*used += size
	}
	// The range GETs, arrowReadAhead at a time; the frames in group order.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, arrowReadAhead)
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if j.frame, j.err = r.readGroup(ctx, e.Object, info, j.g, j.as, j.cols); j.err != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, j := range jobs {
		if j.err != nil {
			for _, j := range jobs {
				if j.frame != nil {
					j.frame.Release()
				}
			}
			return false, j.err
		}
	}
	for _, j := range jobs {
		ref := info.Batches[j.g]
		out.items = append(out.items, arrowItem{base: ref.BaseOffset, frame: j.frame})
		out.NextOffset = ref.End()
	}
	if !full {
		// The segment's range may end past its last group (compaction leaves gaps).
		out.NextOffset = max(out.NextOffset, e.End())
	}
	return full, nil
}

// recordColumns returns names plus the key, timestamp and headers columns of as.
func recordColumns(as *arrow.Schema, names []string) []string {
	out := slices.Clone(names)
	md := as.Metadata()
	for _, k := range []string{"loam.key", "loam.timestamp"} {
		if v, ok := md.GetValue(k); ok && v != "" {
			out = append(out, v)
		}
	}
	return append(out, arrowenc.HeadersColumn)
}

// wantedColumns returns the positions in as of the columns named (all when none), in
// schema order; names as lacks are left out.
func wantedColumns(as *arrow.Schema, names []string) []int {
	if len(names) == 0 {
		out := make([]int, as.NumFields())
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for _, n := range names {
		for _, i := range as.FieldIndices(n) {
			if !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ArrowCoalesceGap: two wanted columns of a group are read with one GET when the columns
// between them hold at most this many bytes (adjacent columns always are): reading a few
// KiB more costs less than another GET's first-byte latency.
const ArrowCoalesceGap = 64 << 10

// gapBytes is the bytes of columns [from, to) of a group.
func gapBytes(gr segfmt.ArrowGroupRef, from, to int) int64 {
	var n int64
	for _, c := range gr.Columns[from:to] {
		n += c.Length
	}
	return n
}

// readGroup range-reads columns cols (ascending) of group g, one GET per run of adjacent
// columns (runs ArrowCoalesceGap or less apart merged), checks each column chunk's CRC,
// decodes the wanted chunks and returns the rows as one frame of those columns (its
// batches alias the bytes read; the caller releases it).
func (r *Reader) readGroup(ctx context.Context, key string, info *segfmt.Info, g int, as *arrow.Schema, cols []int) (*arrowenc.Frame, error) {
	gr := info.Arrow.Groups[g]
	ref := info.Batches[g]
	arrays := make([][]arrow.Array, len(cols)) // per wanted column, one array per batch
	defer func() {
		for _, as := range arrays {
			for _, a := range as {
				a.Release()
			}
		}
	}()
	for i := 0; i < len(cols); {
		j := i + 1
		for j < len(cols) && gapBytes(gr, cols[j-1]+1, cols[j]) <= ArrowCoalesceGap {
			j++
		}
		lo, hi := cols[i], cols[j-1]+1
		off, n := info.ColumnSpan(g, lo, hi)
		r.cfg.Metrics.hit("object")
		b, err := r.cfg.Bucket.GetRange(ctx, key, off, n)
		if err != nil {
			return nil, fmt.Errorf("reader: read %s [%d+%d]: %w", key, off, n, err)
		}
		if err := info.CheckColumns(g, lo, hi, b); err != nil {
			return nil, fmt.Errorf("reader: %s: %w", key, err)
		}
		for k := i; k < j; k++ {
			cr := gr.Columns[cols[k]]
			chunk := b[cr.Offset-off : cr.Offset-off+cr.Length]
			if arrays[k], err = arrowenc.DecodeColumnChunk(chunk, as.Field(cols[k]).Type); err != nil {
				return nil, fmt.Errorf("reader: %s group %d column %s: %w", key, g, as.Field(cols[k]).Name, err)
			}
		}
		i = j
	}
	proj := arrowenc.ProjectSchema(as, cols)
	nb := -1
	for k, a := range arrays {
		if nb >= 0 && len(a) != nb {
			return nil, fmt.Errorf("reader: %s group %d: column %s holds %d batches, column %s %d: %w",
				key, g, as.Field(cols[k]).Name, len(a), as.Field(cols[0]).Name, nb, segfmt.ErrCorrupt)
		}
		nb = len(a)
	}
	var rows int64
	frame := &arrowenc.Frame{FrameHeader: arrowenc.FrameHeader{SchemaID: gr.SchemaID, Rows: uint32(ref.Count)}, Schema: proj}
	for bi := 0; bi < nb; bi++ {
		cs := make([]arrow.Array, len(cols))
		n := arrays[0][bi].Len()
		for k := range cols {
			cs[k] = arrays[k][bi]
			if cs[k].Len() != n {
				frame.Release()
				return nil, fmt.Errorf("reader: %s group %d batch %d: columns of %d and %d rows: %w", key, g, bi, n, cs[k].Len(), segfmt.ErrCorrupt)
			}
		}
		frame.Batches = append(frame.Batches, array.NewRecordBatch(proj, cs, int64(n)))
		rows += int64(n)
	}
	if len(cols) > 0 && rows != ref.Count {
		frame.Release()
		return nil, fmt.Errorf("reader: %s group %d: %d rows, the index says %d: %w", key, g, rows, ref.Count, segfmt.ErrCorrupt)
	}
	if len(cols) == 0 {
		// No column of this schema version was asked for: the rows, with no columns.
		frame.Batches = append(frame.Batches, array.NewRecordBatch(proj, nil, ref.Count))
	}
	return frame, nil
}

package arrowstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/walfmt"
)

// ErrBadPartition is wrapped by the error of an explicit partition the stream lacks.
var ErrBadPartition = errors.New("arrowstream: no such partition")

// ErrNoRows is returned for a produce of no rows.
var ErrNoRows = errors.New("arrowstream: the Arrow IPC stream holds no rows")

// Placement says where rows go: Partition >= 0 sends all of them there; else each row
// goes by its key column (Kafka's murmur2, as JSON produce places them) and keyless rows
// to Sticky.
type Placement struct {
	Partition int32
	Sticky    int32
}

// Part is the rows of one produce that go to one partition: one writer request.
type Part struct {
	Partition int32
	Rows      int64
}

// Plan is a produce of Arrow record batches built into writer requests: Requests[i]
// holds Parts[i]'s rows in the order the client sent them. RowPart gives each row (in the
// client's order) its Parts index; its offset is the part's base offset plus RowWithin.
type Plan struct {
	Requests  []writer.Request
	Parts     []Part
	RowPart   []int32
	RowWithin []int64
}

// Build checks batches (a client's, of schema version version, sch) row by row
// (arrowenc.Adopt) and places them: one arrow frame per partition. defTsMs is the
// timestamp of rows without one. firstRow numbers the rows in errors. Nothing is kept of
// batches (the caller releases them). Memory: the frames, about the batches' size.
func Build(st meta.Stream, sch *arrowenc.Schema, version uint32, batches []arrow.RecordBatch, place Placement, defTsMs int64, firstRow int64) (*Plan, error) {
	if place.Partition >= st.Partitions {
		return nil, fmt.Errorf("%w: partition %d does not exist: stream %q has partitions 0..%d", ErrBadPartition, place.Partition, st.Name, st.Partitions-1)
	}
	as := sch.Arrow()
	var rows int64
	adopted := make([]arrow.RecordBatch, 0, len(batches))
	defer func() {
		for _, b := range adopted {
			b.Release()
		}
	}()
	for _, b := range batches {
		if b.NumRows() == 0 {
			continue
		}
		a, err := arrowenc.Adopt(sch, as, b, firstRow+rows)
		if err != nil {
			return nil, err
		}
		adopted = append(adopted, a)
		rows += b.NumRows()
	}
	if rows == 0 {
		return nil, ErrNoRows
	}
	plan := &Plan{RowPart: make([]int32, rows), RowWithin: make([]int64, rows)}
	// Each partition's rows as runs of consecutive rows of one batch.
	type run struct {
		batch      int
		start, end int64
	}
	type group struct {
		idx   int32
		runs  []run
		rows  int64
		maxTS int64
	}
	groups := map[int32]*group{}
	var order []int32
	var row int64
	for bi, b := range adopted {
		for r := 0; r < int(b.NumRows()); r++ {
			p := place.Partition
			key, ts, hasTS := arrowenc.RowKeyTimestamp(b, r)
			if p < 0 {
				p = place.Sticky
				if key != nil {
					p = streamapi.KeyPartition(key, st.Partitions)
				}
			}
			if !hasTS {
				ts = defTsMs
			}
			g := groups[p]
			if g == nil {
				g = &group{idx: int32(len(order)), maxTS: ts}
				groups[p] = g
				order = append(order, p)
			}
			if n := len(g.runs); n > 0 && g.runs[n-1].batch == bi && g.runs[n-1].end == int64(r) {
				g.runs[n-1].end++
			} else {
				g.runs = append(g.runs, run{bi, int64(r), int64(r) + 1})
			}
			plan.RowPart[row] = g.idx
			plan.RowWithin[row] = g.rows
			g.rows++
			g.maxTS = max(g.maxTS, ts)
			row++
		}
	}
	for _, p := range order {
		g := groups[p]
		parts := make([]arrow.RecordBatch, 0, len(g.runs))
		for _, rn := range g.runs {
			b := adopted[rn.batch]
			if rn.start == 0 && rn.end == b.NumRows() {
				b.Retain()
				parts = append(parts, b)
			} else {
				parts = append(parts, b.NewSlice(rn.start, rn.end))
			}
		}
		frame, err := encodeJoined(as, version, parts)
		for _, b := range parts {
			b.Release()
		}
		if err != nil {
			return nil, err
		}
		plan.Requests = append(plan.Requests, writer.Request{StreamID: st.ID, Partition: p, Batches: frame, Records: g.rows,
			MaxTimestamp: g.maxTS, Encoding: walfmt.EncodingArrow})
		plan.Parts = append(plan.Parts, Part{Partition: p, Rows: g.rows})
	}
	return plan, nil
}

// maxBatchesPerFrame bounds the record batches of one frame: more runs than this (rows
// of many keys interleaved) are concatenated into one batch, so a frame does not carry a
// batch header per row.
const maxBatchesPerFrame = 16

func encodeJoined(as *arrow.Schema, version uint32, parts []arrow.RecordBatch) ([]byte, error) {
	if len(parts) <= maxBatchesPerFrame {
		return arrowenc.EncodePayload(version, parts...)
	}
	cols := make([]arrow.Array, as.NumFields())
	var rows int64
	for _, b := range parts {
		rows += b.NumRows()
	}
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		arrs := make([]arrow.Array, len(parts))
		for j, b := range parts {
			arrs[j] = b.Column(i)
		}
		c, err := array.Concatenate(arrs, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("arrowstream: join batches: %w", err)
		}
		cols[i] = c
	}
	joined := array.NewRecordBatch(as, cols, rows)
	defer joined.Release()
	return arrowenc.EncodePayload(version, joined)
}

// Outcome is where a Plan's part landed: its base offset, or the error that refused it.
type Outcome struct {
	Partition  int32
	BaseOffset int64 // -1 when Err is set
	Rows       int64
	Err        error
}

// Write writes plan's requests with wr, in one call (one WAL object when they fit), and
// returns the outcome of each part and the commit's consistency token. partial reports a
// write of which some parts committed (writer.ErrPartialCommit); any other error is
// returned as it is (nothing, or not known to have, committed).
func Write(ctx context.Context, wr writer.Writer, plan *Plan) (out []Outcome, token uint64, partial bool, err error) {
	res, err := wr.Write(ctx, plan.Requests)
	partial = errors.Is(err, writer.ErrPartialCommit) && len(res) == len(plan.Requests)
	if err != nil && !partial {
		return nil, 0, false, err
	}
	out = make([]Outcome, len(plan.Parts))
	for i, p := range plan.Parts {
		out[i] = Outcome{Partition: p.Partition, BaseOffset: res[i].BaseOffset, Rows: p.Rows, Err: res[i].Err}
		if res[i].Err != nil {
			out[i].BaseOffset = -1
			continue
		}
		token = max(token, res[i].Token)
	}
	return out, token, partial, nil
}

// JSONRecord is a record whose value is a JSON object of the schema's columns (the JSON
// produce form), for BuildJSON.
type JSONRecord struct {
	Value       []byte
	Headers     []arrowenc.Header
	Partition   *int32 // nil: by the key column, else Sticky
	TimestampMs *int64 // nil: the timestamp column's, else the produce time
}

// BuildJSON validates records against sch (arrowenc.Check: errors name the record and the
// field) and builds one arrow frame per partition, as the HTTP JSON produce does.
func BuildJSON(st meta.Stream, sch *arrowenc.Schema, version uint32, recs []JSONRecord, sticky int32, nowMs int64) (*Plan, error) {
	type group struct {
		idx   int32
		b     *arrowenc.Builder
		maxTS int64
	}
	groups := map[int32]*group{}
	var order []int32
	defer func() {
		for _, g := range groups {
			g.b.Release()
		}
	}()
	plan := &Plan{RowPart: make([]int32, len(recs)), RowWithin: make([]int64, len(recs))}
	for i, rec := range recs {
		row, err := arrowenc.Check(sch, i, rec.Value, rec.Headers, nowMs)
		if err != nil {
			return nil, err
		}
		p := sticky
		switch {
		case rec.Partition != nil:
			if *rec.Partition < 0 || *rec.Partition >= st.Partitions {
				return nil, fmt.Errorf("%w: record %d: partition %d does not exist: stream %q has partitions 0..%d", ErrBadPartition, i, *rec.Partition, st.Name, st.Partitions-1)
			}
			p = *rec.Partition
		case row.Key != nil:
			p = streamapi.KeyPartition(row.Key, st.Partitions)
		}
		ts := row.TimestampMs
		if rec.TimestampMs != nil {
			ts = *rec.TimestampMs
		}
		g := groups[p]
		if g == nil {
			g = &group{idx: int32(len(order)), b: arrowenc.NewBuilder(sch, nil), maxTS: ts}
			groups[p] = g
			order = append(order, p)
		}
		plan.RowPart[i] = g.idx
		plan.RowWithin[i] = int64(g.b.Rows())
		g.b.AppendChecked(row)
		g.maxTS = max(g.maxTS, ts)
	}
	for _, p := range order {
		g := groups[p]
		rows := int64(g.b.Rows())
		batch := g.b.NewBatch()
		frame, err := arrowenc.EncodePayload(version, batch)
		batch.Release()
		if err != nil {
			return nil, err
		}
		plan.Requests = append(plan.Requests, writer.Request{StreamID: st.ID, Partition: p, Batches: frame, Records: rows,
			MaxTimestamp: g.maxTS, Encoding: walfmt.EncodingArrow})
		plan.Parts = append(plan.Parts, Part{Partition: p, Rows: rows})
	}
	return plan, nil
}

package kafka

import (
	"context"
	"time"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// Fetch of an arrow stream (docs/arrow.md, "Kafka clients"): its rows are answered as
// RecordBatch v2 built on the fly, one uncompressed batch per stored Arrow record batch,
// with the stored offsets. A record's key is the key column's value (as the HTTP fetch's
// "key": utf8 and binary as they are, other types as their decimal text; null without a
// key column), its timestamp the timestamp column's in ms (-1, Kafka's "no timestamp",
// without one), its value the row as a JSON object (the HTTP JSON fetch's "value") and
// its headers the headers column's. Produce to an arrow stream is refused
// (INVALID_RECORD): its records are rows of a schema, produced over HTTP, gRPC or Flight.

// fetchArrow reads partition fp of an arrow stream from its offset: up to about limit
// bytes of built batches (at least one batch when there is data).
func (c *conn) fetchArrow(ctx context.Context, fp *fetchPart, limit int) (reader.Result, error) {
	rd, err := arrowstream.ReadBatches(ctx, c.s.cfg.Reader, fp.st.ID, fp.part, fp.offset, int64(limit), 0)
	if err != nil {
		var out reader.Result
		out.LogStart, out.HighWatermark, _ = c.s.cfg.Reader.ArrowBounds(ctx, fp.st.ID, fp.part)
		return out, err
	}
	defer rd.Release()
	out := reader.Result{NextOffset: rd.NextOffset, HighWatermark: rd.HighWatermark, LogStart: rd.LogStart}
	var buf []byte
	for _, b := range rd.Batches {
		if len(buf) > 0 && len(buf) >= limit {
			break
		}
		all, err := arrowenc.Project(b.Batch.Schema(), nil)
		if err != nil {
			return out, err
		}
		n := int(b.Batch.NumRows())
		recs := make([]recordbatch.Record, n)
		for i := 0; i < n; i++ {
			key, ts, hasTS := arrowenc.RowKeyTimestamp(b.Batch, i)
			if !hasTS {
				ts = -1
			}
			recs[i] = recordbatch.Record{Key: key, Value: arrowenc.AppendRowJSON(nil, b.Batch, i, all), Timestamp: ts}
			for _, h := range arrowenc.RowHeaders(b.Batch, i) {
				recs[i].Headers = append(recs[i].Headers, recordbatch.Header{Key: h.Key, Value: h.Value})
			}
		}
		opt := recordbatch.DefaultBuildOptions()
		opt.BaseOffset = b.Offset
		if buf, err = recordbatch.Append(buf, recs, opt); err != nil {
			return out, err
		}
	}
	if len(buf) > 0 {
		out.Batches = [][]byte{buf}
	}
	return out, nil
}

// awaitArrow waits up to wait for partition fp of an arrow stream to pass the high
// watermark the last pass saw, and reports whether it did.
func (c *conn) awaitArrow(ctx context.Context, fp *fetchPart, wait time.Duration) bool {
	if err := c.s.cfg.Reader.WaitArrow(ctx, fp.st.ID, fp.part, fp.hwm, wait); err != nil {
		return ctx.Err() == nil // a failure is news to answer; a called-off wait is not
	}
	_, hwm, err := c.s.cfg.Reader.ArrowBounds(ctx, fp.st.ID, fp.part)
	return err != nil || hwm > fp.hwm
}

// scanArrow is scanEntry of an arrow stream: the first row in [from, end) whose
// timestamp column satisfies ok. Without a timestamp column rows carry no time of their
// own: the first row, from, answers (with timestamp -1), at the granularity of the index
// entry whose produce time reached the one asked.
func (c *conn) scanArrow(ctx context.Context, st meta.Stream, p int32, from, end int64, ok func(int64) bool) (int64, int64, bool, error) {
	for from < end {
		rd, err := arrowstream.ReadBatches(ctx, c.s.cfg.Reader, st.ID, p, from, 1<<20, 0)
		if err != nil {
			return -1, -1, false, err
		}
		for _, b := range rd.Batches {
			for i := 0; i < int(b.Batch.NumRows()); i++ {
				off := b.Offset + int64(i)
				if off >= end {
					break
				}
				_, ts, hasTS := arrowenc.RowKeyTimestamp(b.Batch, i)
				if !hasTS {
					rd.Release()
					return off, -1, true, nil
				}
				if ok(ts) {
					rd.Release()
					return off, ts, true, nil
				}
			}
		}
		next, n := rd.NextOffset, len(rd.Batches)
		rd.Release()
		if n == 0 || next <= from {
			break
		}
		from = next
	}
	return -1, -1, false, nil
}

package reader

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/arrowenc/arrowtest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// segmentBytes is the total size of the segment objects of stream's partition 0.
func segmentBytes(b *testing.B, f *arrowFixture, stream uint64) int64 {
	var n int64
	for _, e := range f.meta.Entries(stream, 0) {
		if e.Kind != meta.KindSegment {
			b.Fatalf("entry at %d is a %v", e.BaseOffset, e.Kind)
		}
		st, err := f.bucket.Stat(context.Background(), e.Object)
		if err != nil {
			b.Fatal(err)
		}
		n += st.Size
	}
	return n
}

// addKafkaCopy writes the fixture's records again into stream 3 as a JSON produce to a
// kafka stream stores them (value: the record's JSON, key: its id, uncompressed batches
// of rows records) and segments it.
func addKafkaCopy(b *testing.B, f *arrowFixture, rows int) {
	f.meta.AddStream(3, 1)
	for from := int64(0); from < f.rows; from += int64(rows) {
		recs := make([]recordbatch.Record, rows)
		for i := range recs {
			in, _ := arrowtest.Record(from+int64(i), false)
			recs[i] = recordbatch.Record{Key: []byte(itoa(from + int64(i))), Value: []byte(in), Timestamp: 1764600000000 + from + int64(i)}
		}
		payload, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
		if err != nil {
			b.Fatal(err)
		}
		wid := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
		obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: wid, Class: walfmt.ClassStandard},
			[]walfmt.Chunk{{StreamID: 3, Partition: 0, Encoding: walfmt.EncodingKafka, Records: int64(rows), MaxTimestamp: 1, Payload: payload}})
		if err != nil {
			b.Fatal(err)
		}
		key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", wid)
		if err := f.bucket.Put(context.Background(), key, obj); err != nil {
			b.Fatal(err)
		}
		f.meta.Commit(3, 0, meta.IndexEntry{Count: refs[0].Records, Kind: meta.KindWAL, Object: key, Offset: refs[0].Offset, Length: refs[0].Length, MaxTimestamp: 1})
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// BenchmarkArrowSegments: 100,000 records of ten columns in arrow segments (and the same
// records in kafka segments, for the bytes per record); cold reads (a new reader, nothing
// cached, footers included) of every column and of 1 of 10 ("score"), frames decoded as a
// Flight DoGet or HTTP fetch would. MB/s is the Arrow IPC served; bucket-B/op what was
// read from the bucket.
func BenchmarkArrowSegments(b *testing.B) {
	const chunks, rows = 200, 500
	f := newArrowFixture(b, chunks, rows, false)
	f.segment(b, 8<<20)
	addKafkaCopy(b, f, rows)
	seg := segmentsOf(b, f, 3)
	b.ResetTimer()
	b.Logf("segment bytes per record: arrow %.1f, kafka %.1f (%d records; %d and %d segments)",
		float64(segmentBytes(b, f, 2))/float64(f.rows), float64(segmentBytes(b, f, 3))/float64(f.rows), f.rows, len(f.meta.Entries(2, 0)), seg)
	for _, c := range []struct {
		name string
		cols []string
	}{{"all-columns", nil}, {"1-of-10", []string{"score"}}} {
		b.Run(c.name, func(b *testing.B) {
			var served, bucket, got int64
			for b.Loop() {
				cb := objstore.Counting(f.bucket)
				r, err := New(Config{Bucket: cb, Meta: lookups{m: f.meta}})
				if err != nil {
					b.Fatal(err)
				}
				served, got = 0, 0
				for off := int64(0); off < f.rows; {
					res, err := r.ReadArrowColumns(context.Background(), ArrowRead{StreamID: 2, Offset: off, Columns: c.cols, MaxBytes: 8 << 20})
					if err != nil {
						b.Fatal(err)
					}
					for _, ch := range res.Chunks {
						frames, err := arrowenc.DecodePayload(ch.Payload)
						if err != nil {
							b.Fatal(err)
						}
						got += arrowenc.Rows(frames)
						served += int64(len(ch.Payload))
						arrowenc.ReleaseFrames(frames)
					}
					off = res.NextOffset
				}
				r.Drain()
				bucket = cb.Stats().GetBytes
				b.ReportMetric(float64(cb.Stats().GetRanges+cb.Stats().Gets), "GETs/op")
			}
			if got != f.rows {
				b.Fatalf("%d rows read, want %d", got, f.rows)
			}
			b.SetBytes(served)
			b.ReportMetric(float64(bucket), "bucket-B/op")
			b.ReportMetric(float64(f.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func segmentsOf(b *testing.B, f *arrowFixture, stream uint64) int {
	n := 0
	sg := f.segmenterFor(b, 8<<20)
	if _, err := sg.Partition(context.Background(), stream, 0); err != nil {
		b.Fatal(err)
	}
	for range f.meta.Entries(stream, 0) {
		n++
	}
	return n
}

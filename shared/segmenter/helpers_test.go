package segmenter

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// rec is one record as a test sees it.
type rec struct {
	Offset int64
	Key    string
	Value  string
	Ts     int64
}

// producer writes WAL objects of several partitions and commits them to a metafake.Meta, the
// way a log node flush does.
type producer struct {
	t      testing.TB
	bucket objstore.Bucket
	meta   *metafake.Meta
	n      int
	at     time.Time    // ULID time of the next object
	node   string       // log node of the next object; default n1
	class  walfmt.Class // class of the next object; default standard
}

type part struct {
	stream uint64
	p      int32
}

// flush writes one WAL object holding, per partition, batches of records.
func (pr *producer) flush(perPart map[part][][]recordbatch.Record) {
	pr.t.Helper()
	var chunks []walfmt.Chunk
	keys := make([]part, 0, len(perPart))
	for k := range perPart {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b part) int {
		if a.stream != b.stream {
			return int(a.stream) - int(b.stream)
		}
		return int(a.p - b.p)
	})
	for _, k := range keys {
		var payload []byte
		var records, maxTs int64
		for _, recs := range perPart[k] {
			var err error
			payload, err = recordbatch.Append(payload, recs, recordbatch.DefaultBuildOptions())
			if err != nil {
				pr.t.Fatal(err)
			}
			records += int64(len(recs))
			for _, r := range recs {
				maxTs = max(maxTs, r.Timestamp)
			}
		}
		chunks = append(chunks, walfmt.Chunk{StreamID: k.stream, Partition: k.p, Encoding: walfmt.EncodingKafka, Records: records, MaxTimestamp: maxTs, Payload: payload})
	}
	at := pr.at
	if at.IsZero() {
		at = time.Now()
	}
	id := ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy())
	node := pr.node
	if node == "" {
		node = "n1"
	}
	class := cmpOr(pr.class, walfmt.ClassStandard)
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: node, ULID: id, Class: class}, chunks)
	if err != nil {
		pr.t.Fatal(err)
	}
	key := walfmt.ObjectKey(class, node, id)
	if err := pr.bucket.Put(context.Background(), key, obj, objstore.IfAbsent()); err != nil {
		pr.t.Fatal(err)
	}
	for _, r := range refs {
		pr.meta.Commit(r.StreamID, r.Partition, meta.IndexEntry{Count: r.Records, Kind: meta.KindWAL, Object: key, Offset: r.Offset, Length: r.Length, MaxTimestamp: r.MaxTimestamp})
	}
	pr.n++
}

// records builds n records of size bytes each for (stream, partition), tagged with seq.
func records(tag string, n, size int, ts int64) []recordbatch.Record {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		copy(v, fmt.Sprintf("%s-%d-", tag, i))
		recs[i] = recordbatch.Record{Key: []byte(fmt.Sprintf("%s-%d", tag, i)), Value: v, Timestamp: ts + int64(i)}
	}
	return recs
}

// readPartition reads every batch of a partition through its index (as the log node's read
// path does) and returns the batch bytes, offset-patched, and the records.
func readPartition(t testing.TB, b objstore.Bucket, entries []meta.IndexEntry) ([][]byte, []rec) {
	t.Helper()
	var batches [][]byte
	var recs []rec
	next := int64(-1)
	for _, e := range entries {
		raw, err := b.GetRange(context.Background(), e.Object, e.Offset, e.Length)
		if err != nil {
			t.Fatal(err)
		}
		payload := raw
		if e.Kind == meta.KindWAL {
			if _, payload, err = walfmt.DecodeChunk(raw); err != nil {
				t.Fatal(err)
			}
		} else {
			// The footer index starts right after the region.
			info, err := segfmt.ReadInfoAt(context.Background(), b, e.Object, e.Offset+e.Length)
			if err != nil {
				t.Fatal(err)
			}
			if info.Header.BaseOffset != e.BaseOffset || info.Header.EndOffset != e.End() {
				t.Fatalf("segment %s covers [%d,%d), entry [%d,%d)", e.Object, info.Header.BaseOffset, info.Header.EndOffset, e.BaseOffset, e.End())
			}
		}
		if next >= 0 && e.BaseOffset != next {
			t.Fatalf("index gap: entry at %d after %d", e.BaseOffset, next)
		}
		next = e.End()
		off := e.BaseOffset
		for rest := payload; len(rest) > 0; {
			batch, tail, err := recordbatch.Parse(rest)
			if err != nil {
				t.Fatal(err)
			}
			cp := slices.Clone(batch.Raw)
			if e.Kind == meta.KindWAL {
				_ = recordbatch.SetBaseOffset(cp, off)
			}
			pb, _, _ := recordbatch.Parse(cp)
			rs, err := pb.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				recs = append(recs, rec{Offset: pb.BaseOffset + int64(r.OffsetDelta), Key: string(r.Key), Value: string(r.Value), Ts: r.Timestamp})
			}
			batches = append(batches, cp)
			off = pb.BaseOffset + pb.OffsetCount()
			rest = tail
		}
	}
	return batches, recs
}

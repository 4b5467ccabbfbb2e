package arrowstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// versions returns n schema versions: version v has columns id and c1..c(v-1).
func versions(t *testing.T, n int) []*arrowenc.Schema {
	var out []*arrowenc.Schema
	for v := 1; v <= n; v++ {
		fields := `{"name":"id","type":"int64","nullable":false}`
		for j := 1; j < v; j++ {
			fields += fmt.Sprintf(`,{"name":"c%d","type":"int8","nullable":true}`, j)
		}
		s, err := arrowenc.ParseSchema([]byte(`{"fields":[` + fields + `],"key":"id"}`))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestMatchWith: every older version is found by its column count, with few reads;
// a schema of no version is refused naming its difference from the latest.
func TestMatchWith(t *testing.T) {
	vs := versions(t, 40)
	st := meta.Stream{ID: 1, StreamConfig: meta.StreamConfig{Name: "s", Partitions: 1}}
	for want := 1; want <= 40; want++ {
		reads := 0
		get := func(_ context.Context, v uint32) (*arrowenc.Schema, uint32, error) {
			reads++
			if v == 0 {
				v = 40
			}
			return vs[v-1], v, nil
		}
		_, got, err := MatchWith(context.Background(), st, vs[want-1].Arrow(), get)
		if err != nil || got != uint32(want) {
			t.Fatalf("version %d: matched %d, %v", want, got, err)
		}
		if reads > 8 {
			t.Errorf("version %d: %d schema reads", want, reads)
		}
	}
	// The latest known is 38 (a stale cache) but 39 and 40 exist: a schema of 40 matches.
	stale := func(_ context.Context, v uint32) (*arrowenc.Schema, uint32, error) {
		if v == 0 {
			v = 38
		}
		if v > 40 {
			return nil, 0, meta.ErrSchemaNotFound
		}
		return vs[v-1], v, nil
	}
	if _, got, err := MatchWith(context.Background(), st, vs[39].Arrow(), stale); err != nil || got != 40 {
		t.Fatalf("newer than the cached latest: %d %v", got, err)
	}
	if _, _, err := MatchWith(context.Background(), st, versions(t, 42)[41].Arrow(), stale); !errors.Is(err, arrowenc.ErrSchemaMismatch) {
		t.Fatalf("newer than any: %v", err)
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "zz", Type: arrow.PrimitiveTypes.Int8, Nullable: true}}, nil)
	_, _, err := MatchWith(context.Background(), st, bad, func(_ context.Context, v uint32) (*arrowenc.Schema, uint32, error) {
		if v == 0 {
			v = 40
		}
		return vs[v-1], v, nil
	})
	if !errors.Is(err, arrowenc.ErrSchemaMismatch) || !strings.Contains(err.Error(), `column 1 is "zz", the stream's schema has "c1" (schema version 40 of stream "s")`) {
		t.Fatalf("bad schema: %v", err)
	}
}

// TestBuildPlacement: rows go where the key column sends them (the murmur2 JSON produce
// uses), in order within a partition, across batches and with many interleaved runs.
func TestBuildPlacement(t *testing.T) {
	sch := versions(t, 1)[0]
	as := sch.Arrow()
	st := meta.Stream{ID: 1, StreamConfig: meta.StreamConfig{Name: "s", Partitions: 4}}
	var batches []arrow.RecordBatch
	for b := 0; b < 3; b++ {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
		for i := 0; i < 50; i++ {
			rb.Field(0).(*array.Int64Builder).Append(int64(b*50 + i))
		}
		batches = append(batches, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	plan, err := Build(st, sch, 1, batches, Placement{Partition: -1}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	for id := 0; id < 150; id++ {
		part := plan.Parts[plan.RowPart[id]].Partition
		if want := streamapi.KeyPartition([]byte(fmt.Sprint(id)), 4); part != want {
			t.Fatalf("id %d in partition %d, want %d", id, part, want)
		}
		if plan.RowWithin[id] != next[part] {
			t.Fatalf("id %d at %d within partition %d, want %d", id, plan.RowWithin[id], part, next[part])
		}
		next[part]++
	}
	for i, req := range plan.Requests {
		frames, err := arrowenc.DecodePayload(req.Batches)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, f := range frames {
			if len(f.Batches) > maxBatchesPerFrame {
				t.Errorf("partition %d: a frame of %d batches", req.Partition, len(f.Batches))
			}
			for _, b := range f.Batches {
				ids = append(ids, b.Column(0).(*array.Int64).Int64Values()...)
			}
		}
		arrowenc.ReleaseFrames(frames)
		if int64(len(ids)) != req.Records || req.Records != plan.Parts[i].Rows {
			t.Fatalf("partition %d: %d rows, request says %d", req.Partition, len(ids), req.Records)
		}
		for j := 1; j < len(ids); j++ {
			if ids[j] <= ids[j-1] {
				t.Fatalf("partition %d: rows out of order: %v", req.Partition, ids)
			}
		}
	}
	// An explicit partition takes every row, the batches as they are.
	plan, err = Build(st, sch, 1, batches, Placement{Partition: 3}, 0, 0)
	if err != nil || len(plan.Requests) != 1 || plan.Requests[0].Partition != 3 || plan.Requests[0].Records != 150 {
		t.Fatalf("explicit partition: %+v %v", plan, err)
	}
	if _, err := Build(st, sch, 1, batches, Placement{Partition: 4}, 0, 0); !errors.Is(err, ErrBadPartition) {
		t.Fatalf("partition 4: %v", err)
	}
}

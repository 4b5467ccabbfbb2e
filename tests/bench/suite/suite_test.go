package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

func TestMeasured(t *testing.T) {
	r := measured("s", "x", "MB/s", []float64{10, 30, 20}, []float64{5, 10, 40})
	if *r.Value != 20 || *r.RefValue != 10 {
		t.Fatalf("value %v ref %v, want medians 20 and 10", *r.Value, *r.RefValue)
	}
	// Per-repetition ratios 2, 3, 0.5: their median, not 20/10.
	if *r.Ratio != 2 {
		t.Fatalf("ratio %v, want 2 (median of per-repetition ratios)", *r.Ratio)
	}
	if *r.Spread != 1 { // (30-10)/20
		t.Fatalf("spread %v, want 1", *r.Spread)
	}
	if one := measured("s", "x", "u", []float64{7}, nil); *one.Spread != 0 || one.Ratio != nil {
		t.Fatalf("one repetition: spread %v ratio %v", *one.Spread, one.Ratio)
	}
}

func TestGoal(t *testing.T) {
	tests := []struct {
		g            Goal
		value, ratio float64
		want         bool
	}{
		{Goal{OnRatio: true, Op: ">=", X: 1}, 5, 1.2, true},
		{Goal{OnRatio: true, Op: ">=", X: 1}, 5, 0.8, false},
		{Goal{Op: "<=", X: 10}, 9, 100, true},
		{Goal{Op: "<=", X: 10}, 11, 0, false},
	}
	for _, tt := range tests {
		if got := *tt.g.meets(ptr(tt.value), ptr(tt.ratio)); got != tt.want {
			t.Errorf("%s with value %v ratio %v: %v, want %v", tt.g.String(), tt.value, tt.ratio, got, tt.want)
		}
	}
	var none *Goal
	if none.meets(ptr(1), nil) != nil || none.String() != "" {
		t.Error("no goal must not judge")
	}
}

func TestCheck(t *testing.T) {
	ok := []Row{
		measured("s", "a", "u", []float64{1.5}, nil),
		skipped("s", "b", "u", "gRPC: surface does not exist yet"),
		{Name: "zero count", Value: ptr(0), zeroOK: true},
	}
	if err := check(ok); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		err := check([]Row{{Name: "bad row", Value: ptr(v)}})
		if err == nil || !strings.Contains(err.Error(), "bad row") {
			t.Errorf("value %v: %v, want an error naming the row", v, err)
		}
	}
	if err := check([]Row{{Name: "no value"}}); err == nil {
		t.Error("a row with neither value nor skip reason passed")
	}
	if err := check([]Row{{Name: "bad ratio", Value: ptr(1), Ratio: ptr(math.Inf(1))}}); err == nil {
		t.Error("an infinite ratio passed")
	}
}

func TestMarkdown(t *testing.T) {
	rows := []Row{
		skipped("2. b", "later section first", "MB/s", "Kafka gateway: surface does not exist yet"),
		measured("1. a", "fast", "MB/s", []float64{100, 110}, []float64{50, 50}),
	}
	rows[1].Goal = &Goal{OnRatio: true, Op: ">=", X: 1}
	rows[1].Peer = "peer"
	var b bytes.Buffer
	rep := Report{Date: "d", Commit: "c", Repetitions: 2, Rows: rows}
	for i := range rep.Rows {
		rep.Rows[i].Meets = rep.Rows[i].Goal.meets(rep.Rows[i].Value, rep.Rows[i].Ratio)
	}
	writeMarkdown(&b, rep)
	md := b.String()
	for _, want := range []string{"| fast | 105 MB/s | peer (50.0) | 2.10 | ratio ≥ 1.00 ✓ | 10 % |", "| later section first | skipped |", "Kafka gateway: surface does not exist yet"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestOpenLoopChargesStalls: a server that stalls for 300 ms in the middle of the run
// delays every request scheduled during the stall; timed from the intended send time,
// they show it (a closed-loop or coordinated-omission timer would record one slow request).
func TestOpenLoopChargesStalls(t *testing.T) {
	var mu sync.Mutex // a serial server
	t0 := time.Now()
	send := func(ctx context.Context, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if i == 20 {
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}
	h, errs, err := openLoop(context.Background(), 100, time.Second, 1000, send)
	if err != nil || errs != 0 {
		t.Fatal(err, errs)
	}
	if h.TotalCount() != 100 {
		t.Fatalf("%d latencies recorded, want 100", h.TotalCount())
	}
	if el := time.Since(t0); el < 900*time.Millisecond {
		t.Fatalf("100 requests at 100/s took %v: the loop did not keep its schedule", el)
	}
	// About 30 requests were due during the stall: at least 10 % of all waited > 100 ms.
	if p90 := time.Duration(h.ValueAtQuantile(90)) * time.Microsecond; p90 < 100*time.Millisecond {
		t.Fatalf("p90 %v: the requests queued behind the stall were not charged for it", p90)
	}
}

func TestOpenLoopCountsUnsent(t *testing.T) {
	block := make(chan struct{})
	time.AfterFunc(200*time.Millisecond, func() { close(block) }) // after the schedule ends
	_, errs, err := openLoop(context.Background(), 200, 100*time.Millisecond, 1, func(ctx context.Context, i int) error {
		if i == 0 {
			<-block
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs == 0 {
		t.Fatal("requests that found no free slot were dropped silently; want them counted as errors")
	}
}

func TestLoamBodies(t *testing.T) {
	w := workload{Size: 300, PerReq: 7, Partitions: 3}
	seen := map[int32]int{}
	for _, body := range loamBodies(w, 2) {
		var req streamapi.ProduceRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		if len(req.Records) != w.PerReq {
			t.Fatalf("%d records, want %d", len(req.Records), w.PerReq)
		}
		for _, r := range req.Records {
			if len(r.Value) != w.Size {
				t.Fatalf("value of %d bytes, want %d", len(r.Value), w.Size)
			}
			seen[*r.Partition]++
		}
	}
	if len(seen) != 3 || seen[0] != 5 || seen[1] != 5 || seen[2] != 4 {
		t.Fatalf("partitions %v, want round-robin over 3", seen)
	}
}

// TestClosedLoopFixedWork: a fixed amount of work (sends returning errDone once it is all
// handed out) completes whole: the first worker to run out must not cancel the sends the
// others still have in flight (which left the kfake fetch waiting for records never
// written).
func TestClosedLoopFixedWork(t *testing.T) {
	var mu sync.Mutex
	next, done := 0, 0
	_, err := closedLoop(context.Background(), workload{Conc: 4, PerReq: 1}, time.Hour, func(ctx context.Context, wk, i int) error {
		mu.Lock()
		k := next
		next++
		mu.Unlock()
		if k >= 40 {
			return errDone
		}
		select {
		case <-time.After(time.Duration(1+wk*3) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		done++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if done != 40 {
		t.Fatalf("%d of 40 sends completed", done)
	}
}

func TestFetchPosition(t *testing.T) {
	off := int64(7)
	body, _ := json.Marshal(streamapi.FetchResponse{Records: []streamapi.Record{{Offset: &off, Value: json.RawMessage(`{"next_offset":99}`)}},
		NextOffset: 8, HighWatermark: 12, LogStart: 0})
	next, hw, err := fetchPosition(body)
	if err != nil || next != 8 || hw != 12 {
		t.Fatalf("fetchPosition = %d, %d, %v; want 8, 12", next, hw, err)
	}
	for _, bad := range []string{`{"records":[]}`, `{"records":[],"next_offset":"x"}`, `{"records":[],"next_offset":3}`} {
		if _, _, err := fetchPosition([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

package streamapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// aheadServer is the consumer API of one stream of one partition whose committed offset is
// 100, where fetches at 100 answer offset_out_of_range with a high watermark of 50 (a node
// whose view lags) for the first `lagging` fetches (-1: always), and then an empty read.
type aheadServer struct {
	mu      sync.Mutex
	lagging int
	offsets []int64 // every fetch's offset
	first0  time.Time
}

func (s *aheadServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/heartbeat"):
		json.NewEncoder(w).Encode(Assignment{StreamID: 1, Partitions: 1, Members: 1, ExpiresMs: 60_000, ClockMs: 0,
			Leases: []Lease{{Partition: 0, Epoch: 1, ExpiresMs: 60_000}}})
	case strings.HasSuffix(r.URL.Path, "/offsets"):
		json.NewEncoder(w).Encode(map[string]any{})
	case strings.HasSuffix(r.URL.Path, "/consumers/app"):
		json.NewEncoder(w).Encode(ConsumerDescription{Name: "app", Partitions: []ConsumerPartition{{Stream: "s", Partition: 0, Committed: 100, HighWatermark: 100}}})
	case strings.HasSuffix(r.URL.Path, "/records"):
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		s.offsets = append(s.offsets, off)
		if off == 0 && s.first0.IsZero() {
			s.first0 = time.Now()
		}
		if off > 50 && s.lagging != 0 {
			if s.lagging > 0 {
				s.lagging--
			}
			zero, fifty := int64(0), int64(50)
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			json.NewEncoder(w).Encode(ErrorBody{Error: ErrorDetail{Code: CodeOffsetOutOfRange, Message: "offset past the high watermark", LogStart: &zero, HighWater: &fifty}})
			return
		}
		w.Header().Set("Content-Type", MediaRecordBatch)
		for _, h := range []string{HeaderNextOffset, HeaderHighWatermark, HeaderLogStart} {
			w.Header().Set(h, strconv.FormatInt(max(off, 0), 10))
		}
		w.Header().Set(HeaderLogStart, "0")
	default:
		http.NotFound(w, r)
	}
}

func (s *aheadServer) fetched() ([]int64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.offsets...), s.first0
}

func aheadConsumer(t *testing.T, s *aheadServer) *Consumer {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.NewConsumer("default", "app", "s", ConsumerOptions{Member: "m1", Session: 10 * time.Second, MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConsumerKeepsPositionAheadOfLaggingNode: a node whose view of a partition lags
// behind the committed offset answers offset_out_of_range (position past its high
// watermark) for a while; the member keeps its position and reads on from it once the
// node caught up. Before, it moved to the log start and read the partition again.
func TestConsumerKeepsPositionAheadOfLaggingNode(t *testing.T) {
	s := &aheadServer{lagging: 5}
	m := aheadConsumer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, err := m.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		offs, _ := s.fetched()
		if len(offs) >= 8 {
			for _, o := range offs {
				if o != 100 {
					t.Fatalf("fetched offsets %v: want every one at the committed 100", offs)
				}
			}
			if p, _ := m.Position(0); p != 100 {
				t.Fatalf("position %d, want 100", p)
			}
			return
		}
	}
}

// TestConsumerAheadForGoodMovesToLogStart: a position that stays past the high watermark
// for aheadGrace (a stream recreated) moves to the log start, not before.
func TestConsumerAheadForGoodMovesToLogStart(t *testing.T) {
	defer func(g time.Duration) { aheadGrace = g }(aheadGrace)
	aheadGrace = 300 * time.Millisecond
	s := &aheadServer{lagging: -1}
	m := aheadConsumer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	for {
		if _, err := m.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		offs, at := s.fetched()
		if !at.IsZero() {
			if d := at.Sub(start); d < aheadGrace {
				t.Fatalf("moved to the log start after %v, before the grace of %v", d, aheadGrace)
			}
			if n := len(offs); n > 40 {
				t.Fatalf("%d fetches within the grace: want them spaced", n)
			}
			return
		}
	}
}

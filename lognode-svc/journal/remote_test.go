package journal

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestRemoteRead: a host without a member learns the journal's partitions from a member,
// reads committed batches from one (offloaded, out-of-range and unknown partitions
// answered as such), long-polls on it, and waits for a commit's token there.
func TestRemoteRead(t *testing.T) {
	hs := newHosts(t, 4)
	l := hs.leader()
	ctx := context.Background()
	far := hs.hosts[3]
	p := Partition{Stream: 9, Partition: 1}
	if _, err := hs.hosts[l].Assign(ctx, "j0", Assign{Stream: 9, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	var last Result
	for i := 0; i < 3; i++ {
		r, err := far.Append(ctx, "j0", app(t, p, meta.ChunkProducer{ID: -1}, "r", 2))
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	if err := far.AwaitRemote(ctx, "j0", last.Index, 5*time.Second); err != nil {
		t.Fatalf("await token %d: %v", last.Index, err)
	}
	if !far.HasRemote(ctx, "j0", p) || far.HasRemote(ctx, "j0", Partition{Stream: 9, Partition: 2}) || far.HasRemote(ctx, "j0", Partition{Stream: 8}) {
		t.Fatal("HasRemote: want stream 9 partitions 0..1 only")
	}
	rr, err := far.ReadRemote(ctx, "j0", p, 2, 1<<20, 0)
	if err != nil || rr.Next != 6 || rr.HighWatermark != 6 || rr.Start != 0 {
		t.Fatalf("remote read: %+v %v", rr, err)
	}
	if got := values(t, rr.Batches); !reflect.DeepEqual(got, []string{"2:r-0", "3:r-1", "4:r-0", "5:r-1"}) {
		t.Fatalf("remote read values %v", got)
	}
	if _, err := far.ReadRemote(ctx, "j0", p, 7, 1<<20, 0); !errors.Is(err, meta.ErrOffsetOutOfRange) {
		t.Fatalf("beyond the high watermark: %v", err)
	}
	if _, err := far.ReadRemote(ctx, "j0", Partition{Stream: 8}, 0, 1<<20, 0); !errors.Is(err, ErrNotInJournal) {
		t.Fatalf("unknown partition: %v", err)
	}
	// Trim (as offload does) on the leader: below the start is offloaded.
	tr, err := hs.hosts[l].Member("j0").TrimTo(ctx, Trim{Partition: p, Offset: 4, Segment: SegmentRef{Key: "seg/x", Base: 0, End: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := far.AwaitRemote(ctx, "j0", tr.Index, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rr, err := far.ReadRemote(ctx, "j0", p, 1, 1<<20, 0); !errors.Is(err, ErrOffloaded) || rr.Start != 4 || rr.HighWatermark != 6 {
		t.Fatalf("below the start: %+v %v", rr, err)
	}
	// A long-poll at the high watermark wakes on the next append.
	done := make(chan ReadResult, 1)
	go func() {
		rr, err := far.ReadRemote(ctx, "j0", p, 6, 1<<20, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- rr
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := far.Append(ctx, "j0", app(t, p, meta.ChunkProducer{ID: -1}, "w", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case rr := <-done:
		if got := values(t, rr.Batches); !reflect.DeepEqual(got, []string{"6:w-0"}) {
			t.Fatalf("long-poll read %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long-poll did not wake")
	}
	// A token a member never reaches times out.
	if err := far.AwaitRemote(ctx, "j0", 1<<40, 50*time.Millisecond); err == nil {
		t.Fatal("await of a future index succeeded")
	}
}

// TestRemoteReadHandlers: the member's read, partitions and applied routes check their
// parameters, and a host without a member says so.
func TestRemoteReadHandlers(t *testing.T) {
	hs := newHosts(t, 4)
	hs.leader()
	get := func(i int, path string) (int, string, http.Header) {
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return hs.muxes[i].dial(ctx, addr, forwardService, time.Second)
		}}}
		resp, err := c.Get("http://" + hs.muxes[i].Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for path, want := range map[string]string{
		"/read/j0?stream=1&partition=0&offset=0&max_bytes=0&wait_ms=0":  "max_bytes > 0",
		"/read/j0?stream=x&partition=0&offset=0&max_bytes=10&wait_ms=0": "want stream",
		"/read/j0?stream=1&partition=0&offset=0&max_bytes=10":           "wait_ms",
		"/applied/j0?index=x&wait_ms=0":                                 "want index",
	} {
		if code, body, _ := get(0, path); code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 naming %q", path, code, body, want)
		}
	}
	if _, _, h := get(0, "/read/j0?stream=1&partition=0&offset=0&max_bytes=10&wait_ms=0"); h.Get("Loam-Code") != codeNoPart {
		t.Errorf("unknown partition: code %q", h.Get("Loam-Code"))
	}
	if _, _, h := get(3, "/read/j0?stream=1&partition=0&offset=0&max_bytes=10&wait_ms=0"); h.Get("Loam-Code") != codeNoMember {
		t.Errorf("a host without a member: code %q", h.Get("Loam-Code"))
	}
	if code, _, _ := get(3, "/partitions/j0"); code != http.StatusNotFound {
		t.Errorf("partitions on a host without a member: %d", code)
	}
	if code, body, _ := get(0, "/partitions/j0"); code != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("partitions of an empty journal: %d %q", code, body)
	}
}

// FuzzCheckFraming: a remote read's body is accepted only as whole batches, never
// panicking, and every accepted body cuts into batches that cover it exactly.
func FuzzCheckFraming(f *testing.F) {
	b := batch(f, "seed", 2)
	f.Add(b)
	f.Add(append(append([]byte(nil), b...), b...))
	f.Add(b[:len(b)-1])
	f.Add([]byte{})
	f.Add(make([]byte, 11))
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := checkFraming(body); err != nil {
			if !errors.Is(err, ErrBadBatches) {
				t.Fatalf("error %v does not wrap ErrBadBatches", err)
			}
			return
		}
		n := 0
		for rest := body; len(rest) > 0; {
			one, tail, ok := cutBatch(rest)
			if !ok {
				t.Fatalf("accepted body does not cut at byte %d", len(body)-len(rest))
			}
			n += len(one)
			rest = tail
		}
		if n != len(body) {
			t.Fatalf("batches cover %d of %d bytes", n, len(body))
		}
	})
}

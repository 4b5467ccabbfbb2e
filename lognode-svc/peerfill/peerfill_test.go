package peerfill

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

var update = flag.Bool("update", false, "rewrite the golden frame")

// batches builds n one-record batches at offsets base.. with fixed timestamps, so the bytes
// are the same on every run.
func batches(t testing.TB, base int64, n int) []byte {
	t.Helper()
	var out []byte
	for i := range n {
		opt := recordbatch.DefaultBuildOptions()
		opt.BaseOffset = base + int64(i)
		var err error
		out, err = recordbatch.Append(out, []recordbatch.Record{{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte("k"), Value: []byte("value")}}, opt)
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sample(t testing.TB) []Chunk {
	return []Chunk{
		{StreamID: 7, Partition: 0, Entry: meta.IndexEntry{BaseOffset: 10, Count: 2, Kind: meta.KindWAL, Object: "wal/standard/n-1/01ABC.wal", Offset: 64, Length: 300, MaxTimestamp: 1_700_000_000_001}, Batches: [][]byte{batches(t, 10, 2)}},
		{StreamID: 9, Partition: 3, Entry: meta.IndexEntry{BaseOffset: 0, Count: 1, Kind: meta.KindWAL, Object: "wal/standard/n-1/01ABC.wal", Offset: 364, Length: 150, MaxTimestamp: 1_700_000_000_000}, Batches: [][]byte{batches(t, 0, 1)}},
	}
}

// TestFrameGolden pins the frame's bytes and decodes them back to the chunks.
func TestFrameGolden(t *testing.T) {
	chunks := sample(t)
	got := Append(nil, chunks)
	path := filepath.Join("testdata", "frame.golden.hex")
	if *update {
		if err := os.WriteFile(path, []byte(hex.Dump(got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if hex.Dump(got) != string(want) {
		t.Fatalf("frame bytes changed:\n%s\nwant:\n%s", hex.Dump(got), want)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, chunks) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", back, chunks)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Append(nil, sample(t))
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	other := sample(t)
	other[0].Entry.Count = 3 // batches hold 2
	moved := sample(t)
	moved[1].Entry.BaseOffset = 5 // batches start at 0
	seg := sample(t)
	seg[0].Entry.Kind = meta.KindSegment
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"empty":        {nil, "header"},
		"bad magic":    {mut(func(b []byte) []byte { b[0] = 'X'; return b }), "header"},
		"zero chunks":  {[]byte("LTF1\x00\x00\x00\x00"), "0 chunks"},
		"huge count":   {[]byte("LTF1\x00\x01\x00\x00"), "chunks in"},
		"truncated":    {good[:len(good)-3], "data bytes"},
		"trailing":     {append(append([]byte(nil), good...), 0), "after the last chunk"},
		"flipped crc":  {mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "crc"},
		"wrong count":  {Append(nil, other), "entry at"},
		"wrong base":   {Append(nil, moved), "want 5"},
		"segment kind": {Append(nil, seg), "only WAL"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(c.b)
			if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode: %v, want ErrFrame naming %q", err, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample(f)))
	f.Add([]byte("LTF1\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		chunks, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error not ErrFrame: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if again := Append(nil, chunks); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded frame differs")
		}
	})
}

func post(t *testing.T, h http.Handler, method, ct string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, Path, bytes.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestHandler(t *testing.T) {
	var got []Chunk
	h, err := NewHandler(func(c Chunk) { got = append(got, c) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := Append(nil, sample(t))
	if w := post(t, h, http.MethodPost, ContentType, frame); w.Code != http.StatusNoContent {
		t.Fatalf("good frame: %d %s", w.Code, w.Body)
	}
	if !reflect.DeepEqual(got, sample(t)) {
		t.Fatalf("filled %+v", got)
	}
	// The chunks own their bytes: changing the request body does not change them.
	for i := range frame {
		frame[i] = 0
	}
	if !reflect.DeepEqual(got, sample(t)) {
		t.Fatal("filled chunks alias the request body")
	}
	got = nil
	bad := Append(nil, sample(t))
	bad[len(bad)-1] ^= 1
	for _, c := range []struct {
		method, ct string
		body       []byte
		status     int
		code       string
	}{
		{http.MethodGet, ContentType, nil, http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPost, "application/json", Append(nil, sample(t)), http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{http.MethodPost, ContentType, bad, http.StatusBadRequest, "bad_frame"},
		{http.MethodPost, ContentType, make([]byte, MaxFrameBytes+1), http.StatusRequestEntityTooLarge, "request_too_large"},
	} {
		w := post(t, h, c.method, c.ct, c.body)
		if w.Code != c.status || !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.ct, w.Code, w.Body, c.status, c.code)
		}
	}
	if len(got) != 0 {
		t.Fatalf("a refused frame filled %d chunks", len(got))
	}
	req := httptest.NewRequest(http.MethodPost, "/other", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusNotFound {
		t.Fatalf("other path: %d", w.Code)
	}
}

// peerServer is a zone peer: a real HTTP server with the handler, recording fills.
type peerServer struct {
	mu  sync.Mutex
	got []Chunk
	srv *httptest.Server
}

func newPeer(t *testing.T) *peerServer {
	p := &peerServer{}
	h, err := NewHandler(func(c Chunk) { p.mu.Lock(); p.got = append(p.got, c); p.mu.Unlock() }, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = httptest.NewServer(h)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *peerServer) n() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.got) }

func (p *peerServer) addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFillerSendsToEveryPeer: chunks reach every live peer; a dead peer is counted as a
// failure and does not hold the others up.
func TestFillerSendsToEveryPeer(t *testing.T) {
	a, b := newPeer(t), newPeer(t)
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	reg := prometheus.NewRegistry()
	f, err := NewFiller(Config{Registerer: reg, PeersRefresh: time.Millisecond, SendTimeout: time.Second,
		Peers: func(context.Context) ([]Peer, error) {
			return []Peer{{ID: "a", Addr: a.addr()}, {ID: "b", Addr: b.addr()}, {ID: "dead", Addr: deadAddr}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 5 {
		f.Enqueue(sample(t))
	}
	waitFor(t, "10 chunks at both peers", func() bool { return a.n() == 10 && b.n() == 10 })
	waitFor(t, "the dead peer's failures counted", func() bool { return testutil.ToFloat64(f.failed) >= 1 })
	if got := testutil.ToFloat64(f.sent); got != 20 {
		t.Fatalf("sent %v chunks, want 20 (10 to each live peer)", got)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range a.got {
		if !reflect.DeepEqual(c, sample(t)[i%2]) {
			t.Fatalf("chunk %d differs", i)
		}
	}
}

// TestFillerQueueBound: with peers that do not answer, the queue holds at most QueueBytes
// and the rest is dropped and counted; Enqueue never blocks.
func TestFillerQueueBound(t *testing.T) {
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer stuck.Close()
	one := sample(t)[:1]
	size := int64(one[0].size())
	f, err := NewFiller(Config{QueueBytes: 10 * size, SendTimeout: 5 * time.Second,
		Peers: func(context.Context) ([]Peer, error) {
			return []Peer{{ID: "stuck", Addr: strings.TrimPrefix(stuck.URL, "http://")}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defer close(release)
	f.Enqueue(one) // taken by the sender, which then waits on the stuck peer
	waitFor(t, "the first chunk taken", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.queue) == 0 })
	start := time.Now()
	for range 100 {
		f.Enqueue(one)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Enqueue blocked for %v", d)
	}
	f.mu.Lock()
	q, qb := len(f.queue), f.qbytes
	f.mu.Unlock()
	if q != 10 || qb != 10*size {
		t.Fatalf("queue holds %d chunks, %d bytes; want 10, %d", q, qb, 10*size)
	}
	if got := testutil.ToFloat64(f.dropped.WithLabelValues("queue_full")); got != 90 {
		t.Fatalf("dropped %v, want 90", got)
	}
}

package journal

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Reads from a node without a member of the journal: it asks a member over the member's
// mux (forwardService), which answers from its own state (State.Read). Such a node learns
// which partitions the journal holds by asking a member for the list (at most every
// partitionsRefresh, and at once, at most every partitionsRetry, for a stream it does not
// know), so fetches of other streams never leave the node. Memory: the list, 12 bytes per
// quorum stream.

const (
	partitionsRefresh = 2 * time.Second
	partitionsRetry   = 250 * time.Millisecond
	// MaxRemoteWait bounds a remote read's long-poll on the member.
	MaxRemoteWait = 30 * time.Second
)

// Remote read answer codes (header Loam-Code).
const (
	codeOffloaded  = "offloaded"
	codeOutOfRange = "out_of_range"
	codeNoPart     = "no_partition"
	codeNoMember   = "no_member"
)

// ErrNotInJournal: the partition is not in the journal.
var ErrNotInJournal = errors.New("journal: partition not in the journal")

// remoteState is a host's view of the journals it has no member of.
type remoteState struct {
	mu    sync.Mutex
	parts map[string]*journalParts // by journal
}

type journalParts struct {
	streams  map[uint64]uint32 // stream id -> partitions in the journal
	at       time.Time         // when fetched (zero: never)
	tried    time.Time         // the last attempt
	fetching bool              // a fetch is under way
}

// HasRemote reports whether journal holds partition p, as a node without a member of it
// knows from the members. The first call asks a member and waits for its answer; later
// ones answer from the list and refresh it in the background (every partitionsRefresh,
// or after partitionsRetry for a stream not in it), so a fetch of another stream never
// waits for a member.
func (h *Host) HasRemote(ctx context.Context, journal string, p Partition) bool {
	h.remote.mu.Lock()
	if h.remote.parts == nil {
		h.remote.parts = map[string]*journalParts{}
	}
	jp := h.remote.parts[journal]
	if jp == nil {
		jp = &journalParts{}
		h.remote.parts[journal] = jp
	}
	n, known := jp.streams[p.Stream]
	now := time.Now()
	first := jp.at.IsZero() && now.Sub(jp.tried) > partitionsRetry
	refresh := !first && !jp.fetching && (now.Sub(jp.at) > partitionsRefresh || (!known && now.Sub(jp.tried) > partitionsRetry))
	if first || refresh {
		jp.tried, jp.fetching = now, true
	}
	h.remote.mu.Unlock()
	fetch := func(ctx context.Context) (map[uint64]uint32, bool) {
		streams, err := h.fetchPartitions(ctx, journal)
		h.remote.mu.Lock()
		defer h.remote.mu.Unlock()
		jp.fetching = false
		if err != nil {
			return nil, false
		}
		jp.streams, jp.at = streams, time.Now()
		return streams, true
	}
	switch {
	case first:
		if streams, ok := fetch(ctx); ok {
			n, known = streams[p.Stream]
		}
	case refresh:
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			go func() {
				select {
				case <-h.done:
					cancel()
				case <-ctx.Done():
				}
			}()
			fetch(ctx) // clears fetching whatever its outcome
		}()
	}
	return known && p.Partition < n
}

// voterHosts are the host:ports of journal's voters, in the voters' order: a node asks
// the first that answers, so its token waits (AwaitRemote) and reads go to one member.
func (h *Host) voterHosts(journal string) []string {
	h.mu.RLock()
	vs := h.voters[journal]
	h.mu.RUnlock()
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if hp, _, err := SplitMemberAddr(v.Address); err == nil {
			out = append(out, hp)
		}
	}
	return out
}

// AwaitRemote waits, at most wait (and MaxRemoteWait), until the member a node without
// one reads from applied index (a journal commit's consistency token).
func (h *Host) AwaitRemote(ctx context.Context, journal string, index uint64, wait time.Duration) error {
	var last error = fmt.Errorf("journal %s: %w: this node knows no member of it", journal, meta.ErrUnavailable)
	for _, hp := range h.voterHosts(journal) {
		err := h.AwaitMember(ctx, hp, journal, index, wait)
		if err == nil || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return last
}

// AwaitMember waits, at most wait (and MaxRemoteWait), until journal's member on the
// node whose journal listener is hostport applied index (the leader asks it before it
// hands it the leadership, so a member still catching up is never given it).
func (h *Host) AwaitMember(ctx context.Context, hostport, journal string, index uint64, wait time.Duration) error {
	u := "http://" + hostport + "/applied/" + url.PathEscape(journal) + "?index=" + strconv.FormatUint(index, 10) +
		"&wait_ms=" + strconv.FormatInt(min(wait, MaxRemoteWait).Milliseconds(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("journal %s: applied %d on %s: HTTP %d: %s", journal, index, hostport, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

func (h *Host) serveApplied(w http.ResponseWriter, r *http.Request) {
	m := h.Member(r.PathValue("journal"))
	if m == nil {
		http.Error(w, "no member of the journal here", http.StatusNotFound)
		return
	}
	index, e1 := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	waitMs, e2 := strconv.ParseInt(r.URL.Query().Get("wait_ms"), 10, 64)
	if e1 != nil || e2 != nil || waitMs < 0 {
		http.Error(w, "applied: want index and wait_ms >= 0", http.StatusBadRequest)
		return
	}
	wctx, cancel := context.WithTimeout(r.Context(), min(time.Duration(waitMs)*time.Millisecond, MaxRemoteWait))
	defer cancel()
	if err := m.WaitApplied(wctx, index); err != nil {
		http.Error(w, fmt.Sprintf("index %d not applied here (at %d): %v", index, m.Applied(), err), http.StatusGatewayTimeout)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Host) fetchPartitions(ctx context.Context, journal string) (map[uint64]uint32, error) {
	var last error = fmt.Errorf("journal %s: %w: this node knows no member of it", journal, meta.ErrUnavailable)
	for _, hp := range h.voterHosts(journal) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		streams, err := h.fetchPartitionsFrom(rctx, hp, journal)
		cancel()
		if err == nil {
			return streams, nil
		}
		last = err
	}
	return nil, last
}

func (h *Host) fetchPartitionsFrom(ctx context.Context, hostport, journal string) (map[uint64]uint32, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostport+"/partitions/"+url.PathEscape(journal), nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("journal %s: partitions from %s: HTTP %d", journal, hostport, resp.StatusCode)
	}
	var out map[uint64]uint32
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("journal %s: partitions from %s: %w", journal, hostport, err)
	}
	return out, nil
}

func (h *Host) servePartitions(w http.ResponseWriter, r *http.Request) {
	m := h.Member(r.PathValue("journal"))
	if m == nil {
		http.Error(w, "no member of the journal here", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m.partitionCounts())
}

// partitionCounts is, per stream in the journal, the number of its partitions (the
// highest held plus one).
func (m *Member) partitionCounts() map[uint64]uint32 {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	out := map[uint64]uint32{}
	for k := range m.fsm.st.parts {
		out[k.Stream] = max(out[k.Stream], k.Partition+1)
	}
	return out
}

// ReadRemote reads p from offset on a member of journal (for a node without one): as
// Member.Read, waiting up to wait (at most MaxRemoteWait) on the member when offset is at
// the high watermark. ErrNotInJournal when the member does not hold p.
func (h *Host) ReadRemote(ctx context.Context, journal string, p Partition, offset int64, maxBytes int, wait time.Duration) (ReadResult, error) {
	var last error = fmt.Errorf("journal %s: %w: this node knows no member of it", journal, meta.ErrUnavailable)
	for _, hp := range h.voterHosts(journal) {
		rr, err := h.readFrom(ctx, hp, journal, p, offset, maxBytes, wait)
		if err == nil || errors.Is(err, ErrOffloaded) || errors.Is(err, meta.ErrOffsetOutOfRange) || errors.Is(err, ErrNotInJournal) {
			return rr, err
		}
		if ctx.Err() != nil {
			return rr, ctx.Err()
		}
		last = err
	}
	return ReadResult{}, last
}

func (h *Host) readFrom(ctx context.Context, hostport, journal string, p Partition, offset int64, maxBytes int, wait time.Duration) (ReadResult, error) {
	q := url.Values{}
	q.Set("stream", strconv.FormatUint(p.Stream, 10))
	q.Set("partition", strconv.FormatUint(uint64(p.Partition), 10))
	q.Set("offset", strconv.FormatInt(offset, 10))
	q.Set("max_bytes", strconv.Itoa(maxBytes))
	q.Set("wait_ms", strconv.FormatInt(min(wait, MaxRemoteWait).Milliseconds(), 10))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostport+"/read/"+url.PathEscape(journal)+"?"+q.Encode(), nil)
	if err != nil {
		return ReadResult{}, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return ReadResult{}, fmt.Errorf("journal %s: read from %s: %w", journal, hostport, err)
	}
	defer resp.Body.Close()
	hdr := func(name string) int64 {
		v, _ := strconv.ParseInt(resp.Header.Get(name), 10, 64)
		return v
	}
	rr := ReadResult{Next: hdr("Loam-Next"), HighWatermark: hdr("Loam-High-Watermark"), Start: hdr("Loam-Start")}
	code := resp.Header.Get("Loam-Code")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return rr, fmt.Errorf("journal %s: read from %s: HTTP %d: %s", journal, hostport, resp.StatusCode, b)
	}
	switch code {
	case "":
	case codeOffloaded:
		return rr, fmt.Errorf("%s offset %d, the journal starts at %d: %w", p, offset, rr.Start, ErrOffloaded)
	case codeOutOfRange:
		return rr, fmt.Errorf("%s offset %d beyond the high watermark %d: %w", p, offset, rr.HighWatermark, meta.ErrOffsetOutOfRange)
	case codeNoPart:
		return rr, fmt.Errorf("%s: %w", p, ErrNotInJournal)
	default:
		return rr, fmt.Errorf("journal %s: read from %s: %s", journal, hostport, code)
	}
	if rr.Batches, err = io.ReadAll(io.LimitReader(resp.Body, int64(maxBytes)+int64(h.maxEntry())+1)); err != nil {
		return rr, fmt.Errorf("journal %s: read from %s: %w", journal, hostport, err)
	}
	if err := checkFraming(rr.Batches); err != nil {
		return rr, fmt.Errorf("journal %s: read from %s: %w", journal, hostport, err)
	}
	return rr, nil
}

// maxEntry is the largest append the members take (the bound of one batch answer beyond
// max_bytes).
func (h *Host) maxEntry() int {
	if n := h.cfg.Member.MaxEntryBytes; n > 0 {
		return n
	}
	return 8 << 20
}

// checkFraming checks that b is whole length-framed batches.
func checkFraming(b []byte) error {
	for len(b) > 0 {
		if len(b) < 12 {
			return fmt.Errorf("%w: %d bytes after the last whole batch", ErrBadBatches, len(b))
		}
		n := 12 + int64(int32(binary.BigEndian.Uint32(b[8:])))
		if n < 12+49 || n > int64(len(b)) {
			return fmt.Errorf("%w: a batch of %d bytes with %d left", ErrBadBatches, n, len(b))
		}
		b = b[n:]
	}
	return nil
}

func (h *Host) serveRead(w http.ResponseWriter, r *http.Request) {
	m := h.Member(r.PathValue("journal"))
	answer := func(code string, rr ReadResult) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Loam-Code", code)
		w.Header().Set("Loam-Next", strconv.FormatInt(rr.Next, 10))
		w.Header().Set("Loam-High-Watermark", strconv.FormatInt(rr.HighWatermark, 10))
		w.Header().Set("Loam-Start", strconv.FormatInt(rr.Start, 10))
		_, _ = w.Write(rr.Batches)
	}
	if m == nil {
		answer(codeNoMember, ReadResult{})
		return
	}
	q := r.URL.Query()
	stream, e1 := strconv.ParseUint(q.Get("stream"), 10, 64)
	part, e2 := strconv.ParseUint(q.Get("partition"), 10, 32)
	offset, e3 := strconv.ParseInt(q.Get("offset"), 10, 64)
	maxBytes, e4 := strconv.Atoi(q.Get("max_bytes"))
	waitMs, e5 := strconv.ParseInt(q.Get("wait_ms"), 10, 64)
	if err := errors.Join(e1, e2, e3, e4, e5); err != nil || maxBytes <= 0 || waitMs < 0 {
		http.Error(w, fmt.Sprintf("read: want stream, partition, offset, max_bytes > 0 and wait_ms >= 0: %v", err), http.StatusBadRequest)
		return
	}
	p := Partition{Stream: stream, Partition: uint32(part)}
	if !m.Has(p) {
		answer(codeNoPart, ReadResult{})
		return
	}
	if wait := min(time.Duration(waitMs)*time.Millisecond, MaxRemoteWait); wait > 0 && m.Next(p) == offset {
		wctx, cancel := context.WithTimeout(r.Context(), wait)
		_ = m.WaitOffset(wctx, p, offset)
		cancel()
	}
	rr, err := m.Read(p, offset, maxBytes)
	switch {
	case errors.Is(err, ErrOffloaded):
		answer(codeOffloaded, rr)
	case errors.Is(err, meta.ErrOffsetOutOfRange):
		answer(codeOutOfRange, rr)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		answer("", rr)
	}
}

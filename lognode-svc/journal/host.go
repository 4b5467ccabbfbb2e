package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
)

// forwardService is the mux service that takes appends forwarded by other log nodes.
const forwardService = "_append"

// HostConfig configures a log node's journal host.
type HostConfig struct {
	NodeID string
	Dir    string // each journal's member under Dir/<journal>
	Mux    *Mux
	// Member is the template of every member's Config (timeouts, bounds, NoSync, logs);
	// Journal, ID, Dir, Mux, Bootstrap and Voters are set per journal.
	Member Config
	// RetryFor bounds how long Append retries while its journal has no leader (an
	// election) or the leader moved (default 10 s, and never past the context).
	RetryFor time.Duration
	// Offload, when set, offloads every member's sealed ranges to segments while it
	// leads (offload.go).
	Offload *OffloadConfig
}

// Host runs the journal members of one log node and routes appends to the leaders of
// their journals: locally when this node's member leads, else forwarded in one hop to the
// leader's node over the leader's mux (forwardService), which appends on its own member
// and never forwards again.
type Host struct {
	cfg     HostConfig
	mu      sync.RWMutex
	members map[string]*Member
	voters  map[string][]raft.Server
	srv     *http.Server
	ln      *layer
	client  *http.Client
	done    chan struct{}
	remote  remoteState // remote.go
}

// NewHost starts a host serving forwarded appends on cfg.Mux.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.NodeID == "" || cfg.Dir == "" || cfg.Mux == nil {
		return nil, errors.New("journal: host needs NodeID, Dir and Mux")
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = 10 * time.Second
	}
	ln, err := cfg.Mux.layer(forwardService)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, members: map[string]*Member{}, voters: map[string][]raft.Server{}, ln: ln, done: make(chan struct{})}
	h.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return cfg.Mux.dial(ctx, addr, forwardService, 5*time.Second)
		},
		MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute,
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /append/{journal}", h.serveAppend)
	mux.HandleFunc("GET /read/{journal}", h.serveRead)             // remote.go
	mux.HandleFunc("GET /partitions/{journal}", h.servePartitions) // remote.go
	mux.HandleFunc("GET /applied/{journal}", h.serveApplied)       // remote.go
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

// Close stops every member and the forwarding service.
func (h *Host) Close() error {
	close(h.done)
	_ = h.srv.Close()
	h.mu.Lock()
	ms := h.members
	h.members = map[string]*Member{}
	h.mu.Unlock()
	var err error
	for _, m := range ms {
		if cerr := m.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Start starts this node's member of journal with its voters (bootstrap: when the member
// has no state yet, the journal starts with them).
func (h *Host) Start(journal string, voters []raft.Server, bootstrap bool) (*Member, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.members[journal]; m != nil {
		return m, nil
	}
	c := h.cfg.Member
	c.Journal, c.ID, c.Dir, c.Mux, c.Bootstrap, c.Voters = journal, h.cfg.NodeID, filepath.Join(h.cfg.Dir, journal), h.cfg.Mux, bootstrap, voters
	m, err := Open(c)
	if err != nil {
		return nil, err
	}
	if h.cfg.Offload != nil {
		if err := m.StartOffload(*h.cfg.Offload); err != nil {
			m.Close()
			return nil, err
		}
	}
	h.members[journal] = m
	h.voters[journal] = append([]raft.Server(nil), voters...)
	return m, nil
}

// Know records a journal's voters for a node without a member of it, so its appends can
// be forwarded.
func (h *Host) Know(journal string, voters []raft.Server) {
	h.mu.Lock()
	h.voters[journal] = append([]raft.Server(nil), voters...)
	h.mu.Unlock()
}

// Stop stops this node's member of journal (its log stays on disk).
func (h *Host) Stop(journal string) error {
	h.mu.Lock()
	m := h.members[journal]
	delete(h.members, journal)
	h.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Close()
}

// Members lists this node's members, by journal id.
func (h *Host) Members() []*Member {
	h.mu.RLock()
	out := make([]*Member, 0, len(h.members))
	for _, m := range h.members {
		out = append(out, m)
	}
	h.mu.RUnlock()
	sort.Slice(out, func(a, b int) bool { return out[a].Journal() < out[b].Journal() })
	return out
}

// Member is this node's member of journal (nil: none).
func (h *Host) Member(journal string) *Member {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.members[journal]
}

// Append appends a to journal on its leader and waits for the majority commit. It retries
// while the journal elects a leader or its leader moved (nothing was written then), and
// after an unknown outcome (a broken forward, a lost leadership): every attempt carries
// the same request id, which the journal answers with the first result if an earlier
// attempt committed (State, RequestIDWindow). It retries for at most RetryFor.
func (h *Host) Append(ctx context.Context, journal string, a Append) (Result, error) {
	if a.ClockMs == 0 {
		a.ClockMs = time.Now().UnixMilli()
	}
	if a.RequestID == 0 {
		a.RequestID = rand.Uint64() | 1 // every retry of this append carries it
	}
	return h.propose(ctx, journal, AppendEntry(nil, a), true, func(m *Member) (Result, error) { return m.Append(ctx, a) })
}

// Assign places a stream's partitions in journal (Assign entry), on its leader, retrying
// as Append does (an assign is idempotent).
func (h *Host) Assign(ctx context.Context, journal string, a Assign) (Result, error) {
	if a.ClockMs == 0 {
		a.ClockMs = time.Now().UnixMilli()
	}
	return h.propose(ctx, journal, AssignEntry(nil, a), true, func(m *Member) (Result, error) { return m.Assign(ctx, a) })
}

func (h *Host) propose(ctx context.Context, journal string, entry []byte, idempotent bool, local func(*Member) (Result, error)) (Result, error) {
	deadline := time.Now().Add(h.cfg.RetryFor)
	var hint string // a leader's host:port named by a refusal
	backoff := 10 * time.Millisecond
	unknown := false // an attempt's outcome was unknown: it may have committed
	for {
		r, err := h.proposeOnce(ctx, journal, entry, local, hint)
		hint = ""
		unknown = unknown || errors.Is(err, ErrCommitUnknown)
		var nl *NotLeaderError
		retry := false
		switch {
		case errors.As(err, &nl):
			retry = true
			if nl.LeaderAddr != "" {
				if hp, _, serr := SplitMemberAddr(raft.ServerAddress(nl.LeaderAddr)); serr == nil {
					hint = hp
					backoff = 0
				}
			}
		case errors.Is(err, ErrCommitUnknown) && idempotent, errors.Is(err, ErrUnreachable), errors.Is(err, raft.ErrEnqueueTimeout):
			retry = true
		}
		if !retry || time.Now().After(deadline) || ctx.Err() != nil {
			return r, unknownIf(unknown, err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return r, unknownIf(unknown, err)
		case <-h.done:
			return r, unknownIf(unknown, ErrClosed)
		}
		backoff = min(max(2*backoff, 10*time.Millisecond), 200*time.Millisecond)
	}
}

// unknownIf answers err as an unknown outcome when an earlier attempt's was: a later
// attempt's refusal (no leader, unreachable, closing) does not tell whether the earlier
// one committed. Its retry under the same request id would have answered that attempt's
// result; nil (a success) stays nil.
func unknownIf(unknown bool, err error) error {
	if !unknown || err == nil || errors.Is(err, ErrCommitUnknown) {
		return err
	}
	return fmt.Errorf("%w: an earlier attempt's outcome is unknown; the last attempt: %w", ErrCommitUnknown, err)
}

// ErrUnreachable: the leader's node could not be reached (its connection was refused) or
// hosts no member of the journal: it did not take the append. Host.Append retries it;
// its caller sees it once HostConfig.RetryFor ran out.
var ErrUnreachable = errors.New("journal: leader unreachable")

func (h *Host) proposeOnce(ctx context.Context, journal string, entry []byte, local func(*Member) (Result, error), hint string) (Result, error) {
	m := h.Member(journal)
	if hint == "" {
		if m != nil {
			if m.IsLeader() {
				return local(m)
			}
			if _, addr := m.Leader(); addr != "" {
				hint, _, _ = SplitMemberAddr(addr)
			}
		}
	}
	if hint == "" {
		h.mu.RLock()
		vs := h.voters[journal]
		h.mu.RUnlock()
		if len(vs) == 0 {
			return Result{}, fmt.Errorf("journal %s: %w: this node knows no member of it", journal, meta.ErrUnavailable)
		}
		// No leader known here: ask a voter (one that is not the leader names it).
		hint, _, _ = SplitMemberAddr(vs[int(time.Now().UnixNano()/int64(time.Millisecond))%len(vs)].Address)
	}
	if hint == h.cfg.Mux.Addr() && m != nil {
		return local(m)
	}
	return h.forward(ctx, hint, journal, entry)
}

// forwardAnswer is the forwarding service's answer.
type forwardAnswer struct {
	Base       int64  `json:"base"`
	Count      int64  `json:"count"`
	Duplicate  bool   `json:"duplicate,omitempty"`
	Index      uint64 `json:"index,omitempty"`
	Code       string `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
	LeaderID   string `json:"leader_id,omitempty"`
	LeaderAddr string `json:"leader_addr,omitempty"`
}

// Forwarding error codes and the errors they stand for.
var forwardCodes = []struct {
	code string
	err  error
}{
	{"out_of_order_sequence", meta.ErrOutOfOrderSequence},
	{"producer_fenced", meta.ErrProducerFenced},
	{"bad_batches", ErrBadBatches},
	{"bad_entry", ErrBadEntry},
	{"journal_full", ErrJournalFull},
	{"too_large", ErrTooLarge},
	{"commit_unknown", ErrCommitUnknown},
	{"closed", ErrClosed},
	{"enqueue_timeout", raft.ErrEnqueueTimeout},
	{"moved", ErrMoved},
}

func (h *Host) forward(ctx context.Context, hostport, journal string, body []byte) (Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+hostport+"/append/"+journal, bytes.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		// The request may have reached the leader: unknown, unless it never connected.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return Result{}, fmt.Errorf("%w: %s: %v", ErrUnreachable, hostport, err)
		}
		return Result{}, fmt.Errorf("%w: journal %s: forward to %s: %v", ErrCommitUnknown, journal, hostport, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var ans forwardAnswer
	if err == nil {
		err = json.Unmarshal(b, &ans)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: journal %s: answer of %s (HTTP %d): %v", ErrCommitUnknown, journal, hostport, resp.StatusCode, err)
	}
	r := Result{Base: ans.Base, Count: ans.Count, Duplicate: ans.Duplicate, Index: ans.Index}
	switch ans.Code {
	case "":
		return r, nil
	case "not_leader":
		return r, &NotLeaderError{Journal: journal, LeaderID: ans.LeaderID, LeaderAddr: ans.LeaderAddr}
	case "no_member":
		return r, fmt.Errorf("%w: %s: %s", ErrUnreachable, hostport, ans.Message)
	}
	for _, c := range forwardCodes {
		if c.code == ans.Code {
			return r, fmt.Errorf("%w: %s (from %s)", c.err, ans.Message, hostport)
		}
	}
	return r, fmt.Errorf("%w: journal %s: %s answered %s: %s", ErrCommitUnknown, journal, hostport, ans.Code, ans.Message)
}

func (h *Host) serveAppend(w http.ResponseWriter, r *http.Request) {
	journal := r.PathValue("journal")
	answer := func(a forwardAnswer) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}
	m := h.Member(journal)
	if m == nil {
		answer(forwardAnswer{Code: "no_member", Message: fmt.Sprintf("node %s has no member of journal %s", h.cfg.NodeID, journal)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(m.cfg.MaxEntryBytes)+appendHeader+1))
	if err != nil {
		answer(forwardAnswer{Code: "bad_entry", Message: err.Error()})
		return
	}
	if len(body) > m.cfg.MaxEntryBytes+appendHeader {
		// Cut at the limit: refused as the member refuses a local append that large.
		answer(forwardAnswer{Code: "too_large", Message: fmt.Sprintf("journal %s: an entry of more than %d bytes of batches, at most %d", journal, len(body)-1-appendHeader, m.cfg.MaxEntryBytes)})
		return
	}
	var res Result
	kind, err := EntryKind(body)
	switch {
	case err != nil:
	case kind == KindAppend:
		var a Append
		if a, err = DecodeAppend(body); err == nil {
			res, err = m.Append(r.Context(), a)
		}
	case kind == KindAssign:
		var a Assign
		if a, err = DecodeAssign(body); err == nil {
			res, err = m.Assign(r.Context(), a)
		}
	default:
		err = fmt.Errorf("%w: kind %d is not forwarded", ErrBadEntry, kind)
	}
	ans := forwardAnswer{Base: res.Base, Count: res.Count, Duplicate: res.Duplicate, Index: res.Index}
	if err != nil {
		ans.Message = err.Error()
		var nl *NotLeaderError
		if errors.As(err, &nl) {
			ans.Code, ans.LeaderID, ans.LeaderAddr = "not_leader", nl.LeaderID, nl.LeaderAddr
		} else {
			ans.Code = "commit_unknown"
			for _, c := range forwardCodes {
				if errors.Is(err, c.err) {
					ans.Code = c.code
					break
				}
			}
		}
	}
	answer(ans)
}

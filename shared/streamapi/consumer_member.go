package streamapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// ConsumerOptions configure a Consumer. The zero value takes the defaults.
type ConsumerOptions struct {
	// Member names this member of the named consumer (default: host-pid-random). Two
	// processes must not share a member name.
	Member string
	// Session is how long the member's leases last without a heartbeat (default 10 s,
	// 100 ms..10 m). The Consumer heartbeats every Session/3 from Poll.
	Session time.Duration
	// MaxBytes bounds one fetch (default 1 MiB).
	MaxBytes int32
	// MaxWait is how long one Poll waits for records when none is ready (default 1 s).
	MaxWait time.Duration
}

// Consumer is one member of a named consumer reading one stream: it heartbeats, follows
// the partitions the sequencer leases to it, fetches them from their committed offsets and
// commits its progress. Delivery is at least once: Poll's records count as consumed when
// it returns them, and are committed by the next heartbeat, Commit or Close; a member that
// dies before that has its successor read them again, never skipping one.
//
// A Consumer is safe for use by one goroutine at a time.
type Consumer struct {
	c                *Client
	ns, name, stream string
	opts             ConsumerOptions

	mu       sync.Mutex
	parts    map[int32]*heldPartition
	lastBeat time.Time
	order    []int32 // held partitions, for round-robin fetching
	next     int
	closed   bool
}

// heldPartition is a leased partition: its lease, when it ends on the local clock, the
// next offset to read, and the last offset committed (-1: none yet).
type heldPartition struct {
	lease     Lease
	until     time.Time
	pos       int64
	committed int64
	// aheadSince is when fetches began answering that pos is past the high watermark
	// (zero: they do not).
	aheadSince time.Time
}

// aheadGrace is how long a position past a partition's high watermark is kept before it
// moves to the log start. A node's view of a partition can lag behind what another node
// served (a journal member catching up after a failover, a node whose view of the offset
// index is behind): such a position becomes readable within seconds. A position that stays
// past the high watermark this long belongs to a stream recreated or a log truncated.
var aheadGrace = 15 * time.Second

// aheadBackoff is the longest a fetch that found its position past the high watermark
// waits before the next one, so a lagging node is not asked in a tight loop.
const aheadBackoff = 200 * time.Millisecond

// NewConsumer returns a member of named consumer `consumer` on stream. It joins at the
// first Poll.
func (c *Client) NewConsumer(ns, consumer, stream string, opts ConsumerOptions) (*Consumer, error) {
	if err := checkNames("new consumer", ns, consumer, stream); err != nil {
		return nil, err
	}
	if opts.Member == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.Member = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if opts.Session == 0 {
		opts.Session = 10 * time.Second
	}
	if opts.Session < 100*time.Millisecond || opts.Session > 10*time.Minute {
		return nil, fmt.Errorf("streamapi: new consumer: %w: session %s: want 100ms..10m", ErrInvalidArgument, opts.Session)
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = time.Second
	}
	return &Consumer{c: c, ns: ns, name: consumer, stream: stream, opts: opts, parts: map[int32]*heldPartition{}}, nil
}

// Member is this member's name.
func (m *Consumer) Member() string { return m.opts.Member }

// Leases lists the partitions this member holds, as of its last heartbeat.
func (m *Consumer) Leases() []Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, 0, len(m.order))
	for _, p := range m.order {
		out = append(out, m.parts[p].lease)
	}
	return out
}

// Position is the next offset this member reads from partition p (ok false when it does
// not hold p).
func (m *Consumer) Position(p int32) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hp, ok := m.parts[p]
	if !ok {
		return 0, false
	}
	return hp.pos, true
}

// margin is how long before a lease's local end the member stops reading the partition,
// so that it never reads what another member may hold.
func (m *Consumer) margin() time.Duration { return m.opts.Session / 10 }

// Poll heartbeats when due (committing progress first) and returns the next records of one
// held partition, each with its Partition and Offset set; none when nothing arrived within
// MaxWait.
func (m *Consumer) Poll(ctx context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("streamapi: consumer %s: %w: closed", m.name, ErrInvalidArgument)
	}
	if time.Since(m.lastBeat) >= m.opts.Session/3 {
		if err := m.beat(ctx); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	var live []int32
	for _, p := range m.order {
		if m.parts[p].until.Add(-m.margin()).After(now) {
			live = append(live, p)
		}
	}
	untilBeat := time.Until(m.lastBeat.Add(m.opts.Session / 3))
	if len(live) == 0 {
		return nil, sleepCtx(ctx, min(m.opts.MaxWait, max(untilBeat, 10*time.Millisecond)))
	}
	for i := range live {
		p := live[(m.next+i)%len(live)]
		wait := time.Duration(0)
		if i == len(live)-1 {
			wait = max(0, min(m.opts.MaxWait, untilBeat, time.Until(m.parts[p].until.Add(-m.margin()))))
		}
		recs, err := m.fetch(ctx, p, wait)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			m.next = (m.next + i + 1) % len(live)
			return recs, nil
		}
	}
	return nil, nil
}

// fetch reads partition p from its position, moving the position past what it returns. A
// position below the log start (trimmed away) moves to the log start. A position past the
// high watermark is kept for aheadGrace (the node answering may lag behind what was read
// before), then moves to the log start too (a stream recreated, a log truncated).
func (m *Consumer) fetch(ctx context.Context, p int32, wait time.Duration) ([]Record, error) {
	hp := m.parts[p]
	res, err := m.c.Fetch(ctx, m.ns, m.stream, p, hp.pos, m.opts.MaxBytes, wait)
	var ae *APIError
	if errors.As(err, &ae) && ae.Detail.Code == CodeOffsetOutOfRange && ae.Detail.LogStart != nil {
		if hw := ae.Detail.HighWater; hw != nil && hp.pos > *hw && hp.pos >= *ae.Detail.LogStart {
			now := time.Now()
			if hp.aheadSince.IsZero() {
				hp.aheadSince = now
			}
			if now.Sub(hp.aheadSince) < aheadGrace {
				_ = sleepCtx(ctx, min(wait, aheadBackoff)) // ctx's end shows at the next call
				return nil, nil
			}
		}
		hp.aheadSince = time.Time{}
		hp.pos = *ae.Detail.LogStart
		if ae.Detail.HighWater != nil && hp.pos > *ae.Detail.HighWater {
			hp.pos = *ae.Detail.HighWater
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hp.aheadSince = time.Time{}
	for i := range res.Records {
		res.Records[i].Partition = &p
	}
	if res.NextOffset > hp.pos {
		hp.pos = res.NextOffset
	}
	return res.Records, nil
}

// beat commits progress, heartbeats and follows the answer: partitions no longer held are
// dropped, new ones start at their committed offset.
func (m *Consumer) beat(ctx context.Context) error {
	if err := m.commit(ctx); err != nil && ErrorCode(err) != CodeStaleConsumerEpoch {
		return err
	}
	sent := time.Now()
	a, err := m.c.Heartbeat(ctx, m.ns, m.name, HeartbeatRequest{Stream: m.stream, Member: m.opts.Member, SessionMs: m.opts.Session.Milliseconds()})
	if err != nil {
		return err
	}
	m.lastBeat = sent
	until := sent.Add(m.opts.Session)
	next := make(map[int32]*heldPartition, len(a.Leases))
	var fresh []int32
	for _, l := range a.Leases {
		if hp, ok := m.parts[l.Partition]; ok && hp.lease.Epoch == l.Epoch {
			hp.lease, hp.until = l, until
			next[l.Partition] = hp
			continue
		}
		next[l.Partition] = &heldPartition{lease: l, until: until, committed: -1}
		fresh = append(fresh, l.Partition)
	}
	if len(fresh) > 0 {
		d, err := m.c.DescribeConsumer(ctx, m.ns, m.name)
		if err != nil {
			return err
		}
		for _, cp := range d.Partitions {
			if hp, ok := next[cp.Partition]; ok && cp.Stream == m.stream && slices.Contains(fresh, cp.Partition) {
				if cp.Committed >= 0 {
					hp.pos, hp.committed = cp.Committed, cp.Committed
				} else {
					hp.pos = cp.LogStart
				}
			}
		}
	}
	m.parts = next
	m.order = m.order[:0]
	for p := range next {
		m.order = append(m.order, p)
	}
	slices.Sort(m.order)
	return nil
}

// commit commits the position of every held partition whose lease is live and that moved.
func (m *Consumer) commit(ctx context.Context) error {
	req := CommitOffsetsRequest{Stream: m.stream, Member: m.opts.Member}
	now := time.Now()
	for _, p := range m.order {
		hp := m.parts[p]
		if hp.pos != hp.committed && hp.until.After(now) {
			req.Offsets = append(req.Offsets, CommitOffset{Partition: p, Offset: hp.pos, Epoch: hp.lease.Epoch})
		}
	}
	if len(req.Offsets) == 0 {
		return nil
	}
	if err := m.c.CommitOffsets(ctx, m.ns, m.name, req); err != nil {
		if ErrorCode(err) == CodeStaleConsumerEpoch {
			m.lastBeat = time.Time{} // heartbeat at the next Poll
		}
		return err
	}
	for _, o := range req.Offsets {
		m.parts[o.Partition].committed = o.Offset
	}
	return nil
}

// Commit commits the progress of every held partition now. An error with code
// CodeStaleConsumerEpoch says a lease was lost meanwhile: nothing was committed, and the
// next Poll heartbeats.
func (m *Consumer) Commit(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commit(ctx)
}

// Close commits progress and leaves the consumer, releasing the leases at once.
func (m *Consumer) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	err := m.commit(ctx)
	if m.lastBeat.IsZero() && len(m.parts) == 0 {
		return err
	}
	_, lerr := m.c.Heartbeat(ctx, m.ns, m.name, HeartbeatRequest{Stream: m.stream, Member: m.opts.Member, Leave: true})
	m.parts, m.order = map[int32]*heldPartition{}, nil
	return errors.Join(err, lerr)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Seek moves this member's position in held partition p to offset (the next Poll reads
// from there, the next commit records it): for instance back to the first record a caller
// did not process. false when the member does not hold p.
func (m *Consumer) Seek(p int32, offset int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	hp, ok := m.parts[p]
	if !ok || offset < 0 {
		return false
	}
	hp.pos = offset
	return true
}

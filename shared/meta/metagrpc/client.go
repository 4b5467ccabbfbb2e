package metagrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
)

// ErrNoAddress: Dial was given no address.
var ErrNoAddress = errors.New("metagrpc: no sequencer address")

type options struct {
	attempts     int
	backoff      time.Duration
	maxBackoff   time.Duration
	readyTimeout time.Duration
	dialOpts     []grpc.DialOption
	noLeaderHdr  bool
}

// Option configures Dial.
type Option func(*options)

// WithAttempts bounds the attempts of one call across addresses (default: 3 per address
// plus 2, at least 8: with the default backoff about 2–5 s, enough to ride out an election).
func WithAttempts(n int) Option { return func(o *options) { o.attempts = n } }

// WithBackoff sets the first pause between attempts and its cap (default 20 ms, 1 s).
func WithBackoff(first, max time.Duration) Option {
	return func(o *options) { o.backoff, o.maxBackoff = first, max }
}

// WithReadyTimeout bounds how long a write waits for a connection before it moves to the
// next address (default 2 s).
func WithReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

// WithoutLeaderHeader ignores LeaderHeader: the client keeps calling the voter that
// answered (which forwards writes to the leader) instead of moving to the leader. NotLeader
// hints are still followed.
func WithoutLeaderHeader() Option { return func(o *options) { o.noLeaderHdr = true } }

// WithDialOptions adds gRPC dial options (default: insecure transport credentials).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// Dial returns a meta.Client over gRPC to the sequencer voters at addrs. It does not wait
// for a connection (a log node may start before the sequencer); ctx is only checked.
//
// Routing: calls go to the last address that answered (the leader, normally). A voter that
// answers ErrNotLeader sends the call to the leader it names, or to the next address. A
// follower that forwarded a call names the leader in a response header (LeaderHeader):
// later calls go to the leader directly, unless a write found it unreachable in the last
// 10 s.
// Reads and the writes whose repeat answers the same (CreateNamespace, AcquireLease and
// ReleaseLease by the same holder, SwapIndex, TrimPartition, ForgetRetired) also move on
// after meta.ErrUnavailable. Other writes move on
// only while nothing was sent (no ready connection); once a write was sent, ErrUnavailable
// is returned as is: its outcome is unknown, and the caller decides (CommitWal retries are
// the log node's to make). Attempts are bounded and respect ctx.
//
// Watch reconnects transparently, resuming after the last event it delivered.
func Dial(ctx context.Context, addrs []string, opts ...Option) (meta.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, ErrNoAddress
	}
	o := options{backoff: 20 * time.Millisecond, maxBackoff: time.Second, readyTimeout: 2 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.attempts <= 0 {
		o.attempts = max(8, 3*len(addrs)+2)
	}
	c := &client{opts: o, conns: map[string]*connEntry{}}
	for _, a := range addrs {
		if a != "" && !slices.Contains(c.addrs, a) {
			c.addrs = append(c.addrs, a)
		}
	}
	if len(c.addrs) == 0 {
		return nil, ErrNoAddress
	}
	c.seeds = len(c.addrs)
	return c, nil
}

// MaxLearned bounds the addresses a client learns from leader hints (NotLeader answers,
// LeaderHeader) beyond those it was dialed with. Past it, the least recently preferred
// learned address is forgotten and its connection closed once no call or Watch uses it,
// so a client never holds more than len(addrs) + MaxLearned connections however many
// leaders (replaced voters, changing addresses) it has heard of.
const MaxLearned = 4

type client struct {
	opts options

	mu sync.Mutex
	// addrs are the dialed addresses (the first seeds), then the learned ones, least
	// recently preferred first; cur indexes the preferred one.
	addrs  []string
	seeds  int
	cur    int
	conns  map[string]*connEntry // only of addresses in addrs
	failed map[string]time.Time  // when a write last found no ready connection there (addresses in addrs)
	closed bool
}

// connEntry is a connection and its users: calls and Watch streams that took it from
// current and have not released it. A forgotten address's connection is closed when its
// last user releases it.
type connEntry struct {
	conn      *grpc.ClientConn
	users     int
	forgotten bool
}

// unreachableFor is how long an address that had no ready connection is not preferred
// because of a LeaderHeader (a client that reaches a follower but not the leader keeps
// using the follower, which forwards).
const unreachableFor = 10 * time.Second

// headerConn records the response header of unary calls.
type headerConn struct {
	*grpc.ClientConn
	md *metadata.MD
}

func (h headerConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return h.ClientConn.Invoke(ctx, method, args, reply, append(opts, grpc.Header(h.md))...)
}

// followLeaderHeader prefers the leader a forwarding follower named in md, unless it was
// recently unreachable.
func (c *client) followLeaderHeader(addr string, md metadata.MD) {
	v := md.Get(LeaderHeader)
	if c.opts.noLeaderHdr || len(v) == 0 || v[0] == "" || v[0] == addr {
		return
	}
	c.mu.Lock()
	t, bad := c.failed[v[0]]
	c.mu.Unlock()
	if !bad || time.Since(t) > unreachableFor {
		c.prefer(v[0])
	}
}

func (c *client) markFailed(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.addrs, addr) {
		return // forgotten meanwhile
	}
	if c.failed == nil {
		c.failed = map[string]time.Time{}
	}
	c.failed[addr] = time.Now()
}

// current returns the preferred address and its connection, which the caller uses until
// it calls release (exactly once).
func (c *client) current() (addr string, conn *grpc.ClientConn, release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return "", nil, nil, fmt.Errorf("metagrpc: client closed: %w", meta.ErrUnavailable)
	}
	addr = c.addrs[c.cur]
	e := c.conns[addr]
	if e == nil {
		dopts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
			// Reconnect within a second or two of a sequencer coming back (gRPC's default
			// backoff grows to two minutes).
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
				BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second,
			}, MinConnectTimeout: 2 * time.Second}),
			// Detect a vanished sequencer host (no FIN) on an idle Watch stream.
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		}, c.opts.dialOpts...)
		conn, err := grpc.NewClient(addr, dopts...)
		if err != nil {
			return "", nil, nil, fmt.Errorf("metagrpc: %s: %w", addr, err)
		}
		e = &connEntry{conn: conn}
		c.conns[addr] = e
	}
	e.users++
	return addr, e.conn, func() { c.release(e) }, nil
}

// release ends one use of e, closing its connection if its address was forgotten and this
// was the last use.
func (c *client) release(e *connEntry) {
	c.mu.Lock()
	e.users--
	closeIt := e.users == 0 && e.forgotten
	c.mu.Unlock()
	if closeIt {
		_ = e.conn.Close()
	}
}

// advance moves the preference past addr (if it is still the preferred one).
func (c *client) advance(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addrs[c.cur] == addr {
		c.cur = (c.cur + 1) % len(c.addrs)
	}
}

// prefer makes addr the preferred address, learning it if new (and forgetting the least
// recently preferred learned address past MaxLearned).
func (c *client) prefer(addr string) {
	c.mu.Lock()
	var drop []*grpc.ClientConn
	i := slices.Index(c.addrs, addr)
	switch {
	case i < 0:
		c.addrs = append(c.addrs, addr)
		for len(c.addrs)-c.seeds > MaxLearned {
			drop = append(drop, c.forgetLocked(c.seeds)...)
		}
	case i >= c.seeds:
		// A learned address: now the most recently preferred.
		c.addrs = append(slices.Delete(c.addrs, i, i+1), addr)
	}
	c.cur = slices.Index(c.addrs, addr)
	c.mu.Unlock()
	for _, conn := range drop {
		_ = conn.Close()
	}
}

// forgetLocked removes addrs[i] (a learned address, not the one being preferred) with its
// failure record, and returns its connection to close now if no call or Watch uses it
// (else its last user closes it).
func (c *client) forgetLocked(i int) []*grpc.ClientConn {
	addr := c.addrs[i]
	c.addrs = slices.Delete(c.addrs, i, i+1)
	delete(c.failed, addr)
	e := c.conns[addr]
	if e == nil {
		return nil
	}
	delete(c.conns, addr)
	e.forgotten = true
	if e.users > 0 {
		return nil
	}
	return []*grpc.ClientConn{e.conn}
}

// ready waits (bounded) for conn to be connected; false means nothing can be sent.
func (c *client) ready(ctx context.Context, conn *grpc.ClientConn) bool {
	return Ready(ctx, conn, c.opts.readyTimeout)
}

// Ready waits up to d for conn to connect; false means nothing can be sent on it now. A
// connection in TRANSIENT_FAILURE (gRPC keeps it there until a reconnection succeeds) is
// given one immediate reconnection, and up to reconnectWait to succeed, rather than left
// to its backoff (the server may be back).
func Ready(ctx context.Context, conn *grpc.ClientConn, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	conn.Connect()
	retried := false
	for {
		s := conn.GetState()
		wctx := ctx
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.Shutdown:
			return false
		case connectivity.Idle:
			conn.Connect()
		case connectivity.TransientFailure:
			if retried {
				return false
			}
			retried = true
			conn.ResetConnectBackoff()
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, reconnectWait)
			defer cancel()
		}
		if !conn.WaitForStateChange(wctx, s) && ctx.Err() != nil {
			return false
		}
	}
}

// reconnectWait bounds the reconnection Ready tries on a failed connection.
const reconnectWait = 250 * time.Millisecond

type kind int

const (
	read  kind = iota // safe to repeat (reads, and writes whose repeat answers the same)
	write             // repeat only when surely not applied
)

// do runs fn against the preferred voter, following leader hints and failing over.
func (c *client) do(ctx context.Context, k kind, fn func(context.Context, metapb.SequencerClient) error) error {
	return c.doConn(ctx, k, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return fn(ctx, metapb.NewSequencerClient(cc))
	})
}

// doConn is do for any service the sequencer serves: fn builds its client on cc.
func (c *client) doConn(ctx context.Context, k kind, fn func(context.Context, grpc.ClientConnInterface) error) error {
	backoff := c.opts.backoff
	var last error
	for attempt := 0; attempt < c.opts.attempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w: %w (last error: %v)", meta.ErrUnavailable, ctx.Err(), last)
			case <-t.C:
			}
			backoff = min(2*backoff, c.opts.maxBackoff)
		}
		addr, conn, release, err := c.current()
		if err != nil {
			return err
		}
		if k == write && !c.ready(ctx, conn) {
			release()
			last = fmt.Errorf("%w: %s: not connected", meta.ErrUnavailable, addr)
			c.markFailed(addr)
			c.advance(addr)
			continue
		}
		var md metadata.MD
		err = FromStatus(fn(ctx, headerConn{conn, &md}))
		release()
		if err == nil {
			c.followLeaderHeader(addr, md)
			return nil
		}
		last = err
		var nl *meta.NotLeaderError
		switch {
		case errors.As(err, &nl):
			if nl.Leader != "" && nl.Leader != addr {
				c.prefer(nl.Leader)
				backoff = c.opts.backoff // a known leader: no need to wait long
			} else {
				c.advance(addr)
			}
		case ctx.Err() != nil:
			return err
		case k == read && errors.Is(err, meta.ErrUnavailable):
			c.advance(addr)
		default:
			return err
		}
	}
	return last
}

func (c *client) CreateNamespace(ctx context.Context, name string) error {
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.CreateNamespace(ctx, &metapb.CreateNamespaceRequest{Name: name})
		return err
	})
}

func (c *client) ListNamespaces(ctx context.Context) ([]string, error) {
	var out []string
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.ListNamespaces(ctx, &metapb.ListNamespacesRequest{})
		out = r.GetNames()
		return err
	})
	return out, err
}

func (c *client) CreateStream(ctx context.Context, cfg meta.StreamConfig) (meta.Stream, error) {
	var out meta.Stream
	err := c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.CreateStream(ctx, &metapb.CreateStreamRequest{Config: metapb.FromStreamConfig(cfg)})
		out = metapb.ToStream(r.GetStream())
		return err
	})
	return out, err
}

func (c *client) UpdateStream(ctx context.Context, ns, name string, p meta.StreamPatch) (meta.Stream, error) {
	var out meta.Stream
	err := c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.UpdateStream(ctx, &metapb.UpdateStreamRequest{Namespace: ns, Name: name, Patch: metapb.FromStreamPatch(p)})
		out = metapb.ToStream(r.GetStream())
		return err
	})
	return out, err
}

func (c *client) DeleteStream(ctx context.Context, ns, name string) error {
	return c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.DeleteStream(ctx, &metapb.DeleteStreamRequest{Namespace: ns, Name: name})
		return err
	})
}

func (c *client) GetStream(ctx context.Context, ns, name string) (meta.Stream, []meta.PartitionState, error) {
	var st meta.Stream
	var parts []meta.PartitionState
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.GetStream(ctx, &metapb.GetStreamRequest{Namespace: ns, Name: name})
		if err != nil {
			return err
		}
		st = metapb.ToStream(r.GetStream())
		parts = make([]meta.PartitionState, len(r.GetPartitions()))
		for i, p := range r.GetPartitions() {
			parts[i] = metapb.ToPartitionState(p)
		}
		return nil
	})
	if err != nil {
		return meta.Stream{}, nil, err
	}
	return st, parts, nil
}

func (c *client) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	var out []meta.Stream
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.ListStreams(ctx, &metapb.ListStreamsRequest{Namespace: ns})
		if err != nil {
			return err
		}
		out = nil
		for _, st := range r.GetStreams() {
			out = append(out, metapb.ToStream(st))
		}
		return nil
	})
	return out, err
}

func (c *client) CommitWal(ctx context.Context, cw meta.CommitWal) (meta.CommitResult, error) {
	var out meta.CommitResult
	req := metapb.FromCommitWal(cw)
	err := c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.CommitWal(ctx, req)
		if err != nil {
			return err
		}
		out = metapb.ToCommitResult(r)
		return nil
	})
	return out, err
}

// InitProducer is a write that is not repeated once sent: a repeat would allocate another
// id or bump the epoch again.
func (c *client) InitProducer(ctx context.Context, ns, name string, id int64, epoch int16) (meta.Producer, error) {
	var out meta.Producer
	req := &metapb.InitProducerRequest{Namespace: ns, Name: name, ProducerId: id, Epoch: int32(epoch)}
	err := c.do(ctx, write, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.InitProducer(ctx, req)
		if err != nil {
			return err
		}
		out = meta.Producer{ID: r.GetProducerId(), Epoch: metapb.Epoch16(r.GetEpoch())}
		return nil
	})
	return out, err
}

func (c *client) Lookup(ctx context.Context, id uint64, p int32, from int64, maxEntries int) ([]meta.IndexEntry, meta.PartitionState, error) {
	var es []meta.IndexEntry
	var st meta.PartitionState
	m := int32(min(max(maxEntries, 0), math.MaxInt32))
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.Lookup(ctx, &metapb.LookupRequest{StreamId: id, Partition: p, From: from, Max: m})
		if err != nil {
			return err
		}
		es, st = metapb.ToIndexEntries(r.GetEntries()), metapb.ToPartitionState(r.GetState())
		return nil
	})
	if err != nil {
		return nil, meta.PartitionState{}, err
	}
	return es, st, nil
}

// Watch streams events from the preferred voter. When the stream breaks it reconnects
// (backing off up to the cap, trying the next address each time) and resumes after the
// last event delivered, or after the index the first stream started at. It returns when
// ctx ends (ctx.Err()), fn fails (its error) or the server refuses the watch.
func (c *client) Watch(ctx context.Context, fromIndex uint64, fn func(meta.Event) error) error {
	last, started := fromIndex, fromIndex != 0
	backoff := c.opts.backoff
	for {
		addr, conn, release, err := c.current()
		if err != nil {
			return err
		}
		err = c.watchOnce(ctx, conn, &last, &started, &backoff, fn)
		release()
		var fnErr fnError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = FromStatus(err)
		if err != nil && err != io.EOF && !errors.Is(err, meta.ErrUnavailable) && !errors.Is(err, meta.ErrNotLeader) {
			return err
		}
		c.advance(addr)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, c.opts.maxBackoff)
	}
}

type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func (c *client) watchOnce(ctx context.Context, conn *grpc.ClientConn, last *uint64, started *bool, backoff *time.Duration, fn func(meta.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := metapb.NewSequencerClient(conn).Watch(ctx, &metapb.WatchRequest{FromIndex: *last})
	if err != nil {
		return err
	}
	hdr, err := stream.Header()
	if err != nil {
		return err
	}
	if !*started {
		if v := hdr.Get(AppliedIndexHeader); len(v) > 0 {
			if idx, perr := strconv.ParseUint(v[0], 10, 64); perr == nil {
				*last, *started = idx, true
			}
		}
	}
	for {
		pe, err := stream.Recv()
		if err != nil {
			return err
		}
		ev := metapb.ToEvent(pe)
		if err := fn(ev); err != nil {
			return fnError{err}
		}
		*last, *started = ev.AppliedIndex, true
		*backoff = c.opts.backoff
	}
}

func (c *client) AcquireLease(ctx context.Context, id uint64, p int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	var out meta.Lease
	req := &metapb.AcquireLeaseRequest{StreamId: id, Partition: p, Kind: kind, Holder: holder, TtlMs: ttl.Milliseconds()}
	// A repeat by the same holder renews the grant it may have received: same epoch.
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.AcquireLease(ctx, req)
		out = metapb.ToLease(r.GetLease())
		return err
	})
	if err != nil {
		return meta.Lease{}, err
	}
	return out, nil
}

func (c *client) ReleaseLease(ctx context.Context, l meta.Lease) error {
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.ReleaseLease(ctx, &metapb.ReleaseLeaseRequest{Lease: metapb.FromLease(l)})
		return err
	})
}

func (c *client) SwapIndex(ctx context.Context, sw meta.IndexSwap) error {
	req := &metapb.SwapIndexRequest{Lease: metapb.FromLease(sw.Lease), Old: metapb.FromIndexEntries(sw.Old),
		New: metapb.FromIndexEntries(sw.New), StampMs: sw.StampMs}
	// A repeat of an applied swap answers nil (the index holds New).
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.SwapIndex(ctx, req)
		return err
	})
}

func (c *client) TrimPartition(ctx context.Context, id uint64, p int32, logStart int64) (meta.PartitionState, error) {
	var out meta.PartitionState
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.TrimPartition(ctx, &metapb.TrimPartitionRequest{StreamId: id, Partition: p, LogStart: logStart})
		out = metapb.ToPartitionState(r.GetState())
		return err
	})
	if err != nil {
		return meta.PartitionState{}, err
	}
	return out, nil
}

func (c *client) ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error) {
	var out []meta.RetiredObject
	l := int32(min(max(limit, 0), math.MaxInt32))
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.ListRetired(ctx, &metapb.ListRetiredRequest{After: after, Limit: l})
		out = metapb.ToRetired(r.GetObjects())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *client) ForgetRetired(ctx context.Context, keys []string) error {
	return c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		_, err := s.ForgetRetired(ctx, &metapb.ForgetRetiredRequest{Keys: keys})
		return err
	})
}

func (c *client) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	var out []bool
	err := c.do(ctx, read, func(ctx context.Context, s metapb.SequencerClient) error {
		r, err := s.Referenced(ctx, &metapb.ReferencedRequest{Keys: keys})
		if err != nil {
			return err
		}
		if len(r.GetReferenced()) != len(keys) {
			return fmt.Errorf("metagrpc: referenced: %d answers for %d keys", len(r.GetReferenced()), len(keys))
		}
		out = r.GetReferenced()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Close closes every connection; calls in flight fail.
func (c *client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, e := range c.conns {
		errs = append(errs, e.conn.Close())
	}
	return errors.Join(errs...)
}

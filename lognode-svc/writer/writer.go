// Package writer is the log node's write path: produce requests are buffered
// across every partition until the flush interval or the size limit, written as one WAL
// object, ordered by the sequencer's CommitWal, and acknowledged with their offsets.
//
// # Basics
//
// A durability class is a property of a stream; each class has a Writer. Buffered is the
// leaderless write path of the standard class (250 ms, one bucket) and, with a 5 ms flush
// and a two-of-three zonal bucket, of the express class. The quorum class (a Raft journal)
// implements the same interface. Every request of one Write call lands in the same WAL
// object and the same CommitWal.
//
// # Outcomes
//
// A Write answers offsets only after the sequencer committed them. The sequencer answers
// each chunk (one partition's requests) on its own: a chunk whose stream was deleted or
// whose partition does not exist is refused, and only the requests in it fail; the other
// requests of the flush, other producers' and this Write's, commit. A Write returns:
//   - nil: every request committed; each Result holds its offsets.
//   - ErrCommitFailed: nothing of this Write was committed (the PUT never succeeded, the
//     first commit attempt was refused, or the sequencer refused every chunk of this
//     Write: the error then wraps the refusal, meta.ErrStreamNotFound or
//     meta.ErrPartitionNotFound, and each Result.Err says why its request failed);
//     retrying the produce is safe.
//   - ErrPartialCommit: some requests committed and the others were refused (only a
//     Write that spans streams or partitions). Every Result then says which: Err nil with
//     its offsets, or ErrCommitFailed wrapping its refusal. Retry only the refused ones.
//   - ErrCommitUnknown: a commit attempt's outcome was unknown and no later attempt settled
//     it within the writer budget (60 s from the object's creation); the write may have
//     happened. A StaleCommit after an unknown attempt is reported this way too.
//
// # Idempotent producers
//
// A Request may carry its producer (id, epoch, base sequence: meta.ChunkProducer). The
// sequencer checks it per chunk, so a chunk carries one producer's requests only: a buffer
// holds per partition either requests without a producer or one producer's. A Write that
// does not fit the current buffer (its partition's chunk is taken) cuts it and starts the
// next. Buffers holding producer requests commit in the order they were cut (each waits
// for the previous one's CommitWal to be answered; PUTs still overlap), so a producer's
// pipelined requests to one node reach the sequencer in sequence order. While two or more
// such buffers wait for their commit, a producer's next request to a partition that
// continues its chunk in the current buffer (same epoch, the next sequence) joins that
// chunk instead of cutting the buffer, and the buffer is cut once the wait is shorter: a
// pipelining producer (a Kafka client with five requests in flight) then commits many
// requests per commit instead of one. The sequencer answers a retry of part of a joined
// chunk as a duplicate with its own offsets. A joined chunk it refuses out of order (a
// retry of what was committed joined with what was not) answers its requests with a
// retriable refusal, and the producer's requests are not joined for a minute. A
// duplicate (the sequencer had committed the same batches before) is answered like a
// commit, with the original offsets and Result.Duplicate set; an out-of-order sequence, a
// fenced epoch or an unknown producer is a refusal like the others (Result.Err wraps
// ErrCommitFailed and meta.ErrOutOfOrderSequence, meta.ErrProducerFenced or
// meta.ErrUnknownProducer): nothing of that request was written.
//
// # Caveats
//
// An empty buffer never flushes, so an idle node makes no PUTs. Offsets of concurrent
// Writes to one partition follow commit order, not arrival order. Many producers writing
// to one partition through one node cost one WAL object per producer request in each
// flush interval.
package writer

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// Errors a Write reports; see the package comment.
var (
	ErrCommitFailed  = errors.New("writer: commit failed, nothing was written")
	ErrCommitUnknown = errors.New("writer: commit outcome unknown, the write may have happened")
	// ErrPartialCommit: some requests of the Write committed, the others were refused
	// (see the package comment); Result.Err tells them apart. It wraps neither
	// ErrCommitFailed nor a refusal: the Write as a whole neither failed nor succeeded.
	ErrPartialCommit = errors.New("writer: some requests committed, others were refused")
	ErrClosed        = errors.New("writer: closed")
	// ErrInvalidRequest: a Write the writer cannot take (a producer field out of range, or
	// two requests of one partition in one Write where one carries a producer). Nothing
	// was written.
	ErrInvalidRequest = errors.New("writer: invalid request")
)

// Request is one partition's share of a produce: validated RecordBatch v2 bytes.
type Request struct {
	StreamID     uint64
	Partition    int32
	Batches      []byte // one or more batches; their baseOffset fields are ignored
	Records      int64  // offsets the batches consume
	MaxTimestamp int64
	// Producer is the idempotent producer of the batches (ID <= 0: none); the batches take
	// sequences Producer.BaseSequence onward, one per record.
	Producer meta.ChunkProducer
	// Encoding is the batches' encoding (0: kafka). An arrow stream's requests are arrow
	// frames (shared/arrowenc), concatenated into the chunk as they are.
	Encoding walfmt.Encoding
	// Checksum, when Checksummed, is the CRC-32C of Batches, as the caller has it from the
	// batches' checked CRCs (recordbatch.Batch.Checksum): the WAL chunk's checksum is
	// combined from it instead of read from the bytes again.
	Checksum    uint32
	Checksummed bool
}

// Result is where a Request landed, or why it did not.
type Result struct {
	BaseOffset int64
	Token      uint64 // the commit's applied index: a consistency token
	// Duplicate is set when the sequencer had committed the request's batches before (a
	// producer's retry): BaseOffset is their original offset and nothing new was written.
	Duplicate bool
	// Err is nil when the request committed. Else the sequencer refused its chunk: Err
	// wraps ErrCommitFailed and the refusal (meta.ErrStreamNotFound,
	// meta.ErrPartitionNotFound), and BaseOffset is -1.
	Err error
}

// Writer is a durability class's write path.
type Writer interface {
	// Write appends reqs and returns their outcomes once committed, in request order (see
	// the package comment): results with a nil error when all committed; with
	// ErrPartialCommit or an ErrCommitFailed from refusals, results whose Err says which
	// requests failed; else nil results.
	Write(ctx context.Context, reqs []Request) ([]Result, error)
	// Close flushes what is buffered and stops.
	Close(ctx context.Context) error
}

// Committed is one chunk as committed, handed to Config.OnCommit so the node can fill its
// tail cache and wake long-polls before the watch stream reports it.
type Committed struct {
	StreamID  uint64
	Partition int32
	Entry     meta.IndexEntry
	// Batches are the chunk's batches, baseOffset patched to their offsets, in the parts
	// its requests brought (each part whole batches, in offset order): the requests' own
	// bytes, neither joined nor copied.
	Batches [][]byte
	Token   uint64
}

// Config configures a Buffered writer.
type Config struct {
	NodeID         string
	Class          walfmt.Class
	FlushInterval  time.Duration // standard 250 ms, express 5 ms
	MaxBufferBytes int           // flush as soon as this many bytes are buffered (8 MiB)
	MaxInflight    int           // flushes in flight at once (8: PUT and commit latency, not CPU, bound the ingest of a node)
	MaxPending     int64         // buffered + in-flight bytes before Write blocks
	Budget         time.Duration // no new commit attempt after this (60 s)
	Bucket         objstore.Bucket
	Meta           meta.Client
	Now            func() time.Time
	OnCommit       func([]Committed)
	// Sealer seals the chunks of namespaces with a customer-managed key (seal.go); nil:
	// every chunk is written as it is.
	Sealer  Sealer
	Logger  *slog.Logger
	Metrics *Metrics
}

func (c *Config) defaults() {
	if c.FlushInterval <= 0 {
		c.FlushInterval = 250 * time.Millisecond
	}
	if c.MaxBufferBytes <= 0 {
		c.MaxBufferBytes = 8 << 20
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 8
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 8 * int64(c.MaxBufferBytes)
	}
	if c.Budget <= 0 {
		c.Budget = meta.WriterBudget
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("writer: NodeID is required")
	case c.Bucket == nil:
		return errors.New("writer: Bucket is required")
	case c.Meta == nil:
		return errors.New("writer: Meta is required")
	case c.Class == 0:
		return errors.New("writer: Class is required")
	}
	return nil
}

type chunkKey struct {
	stream    uint64
	partition int32
}

// slot is one Request inside a chunk: its waiter, its index in the Write, and the offsets
// of the chunk's earlier requests.
type slot struct {
	w      *waiter
	i      int
	before int64
}

type chunkBuf struct {
	parts    [][]byte
	sums     []uint32 // the parts' checksums, while every request had one
	records  int64
	maxTS    int64
	slots    []slot
	producer meta.ChunkProducer // the chunk's producer (its first request's), if any
	joined   bool               // a producer chunk of more than one request
	encoding walfmt.Encoding    // the stream's: every request of a chunk has it
}

type buffer struct {
	chunks    map[chunkKey]*chunkBuf
	bytes     int
	waiters   []*waiter
	timer     *time.Timer
	producers bool // some chunk carries a producer
	joined    bool // some chunk joins a producer's requests
	inChain   bool // cut, its commit not answered yet (counted in Buffered.chain; under mu)
	// Set at cut for a buffer with producers: the previous such buffer's started and
	// committed channels (nil when none), and this one's, closed when its flush took an
	// in-flight slot and when its commit was answered (or it failed before).
	afterStart, afterCommit chan struct{}
	started, committed      chan struct{}
}

type waiter struct {
	results []Result
	refused int // results with Err set
	err     error
	done    chan struct{}
}

// finish sets w.err from its refused requests once its flush was answered: ErrCommitFailed
// wrapping the first refusal when all were refused, ErrPartialCommit when some were.
func (w *waiter) finish() {
	switch {
	case w.refused == 0:
	case w.refused == len(w.results):
		w.err = w.results[0].Err // wraps ErrCommitFailed and the refusal
	default:
		var first error
		for _, r := range w.results {
			if r.Err != nil {
				first = r.Err
				break
			}
		}
		w.err = fmt.Errorf("%w: %d of %d requests refused, the others committed; first: %v", ErrPartialCommit, w.refused, len(w.results), first)
	}
}

// Buffered is the leaderless buffered write path (standard and express classes).
type Buffered struct {
	cfg      Config
	inflight chan struct{} // semaphore of in-flight flushes
	pending  *byteSem

	mu      sync.Mutex
	cur     *buffer
	closed  bool
	flushes sync.WaitGroup

	// The started and committed channels of the last buffer with producers that was cut.
	lastStarted, lastCommitted chan struct{}
	// chain counts the buffers with producers cut whose commit is not answered yet; at
	// mergeDepth or more, a producer's next request to a partition joins its chunk in the
	// current buffer (see fitsLocked). noMerge holds producers whose joined chunk was refused
	// out of order, until when their requests are not joined (at most noMergeMax).
	chain   int
	noMerge map[int64]time.Time

	// objs holds WAL object buffers of flushes whose PUT succeeded at its first attempt,
	// for the next flushes to encode into: at most MaxInflight buffers of at most
	// 2 × MaxBufferBytes each (see objBuf).
	objs chan []byte

	entropy *ulid.MonotonicEntropy
	ulidMu  sync.Mutex

	// unreachable is set while commit attempts find the sequencer unavailable; new
	// writes are then refused at once (nothing written) unless a probe finds it back.
	unreachable atomic.Bool
}

// ErrSequencerUnavailable refuses a write before anything is buffered: the sequencer is
// out of reach, so it could not be committed. Retrying later (or on another node) is safe.
var ErrSequencerUnavailable = fmt.Errorf("%w: the sequencer is unavailable", ErrCommitFailed)

// checkSequencer refuses a write at once while the sequencer is known to be out of reach,
// after one quick probe, so producers get a prompt retriable refusal instead of waiting
// out the writer budget.
func (b *Buffered) checkSequencer(ctx context.Context) error {
	if !b.unreachable.Load() {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := b.cfg.Meta.ListNamespaces(pctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSequencerUnavailable, err)
	}
	b.unreachable.Store(false)
	return nil
}

// NewBuffered starts a buffered writer.
func NewBuffered(cfg Config) (*Buffered, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Buffered{
		cfg:      cfg,
		inflight: make(chan struct{}, cfg.MaxInflight),
		pending:  newByteSem(cfg.MaxPending),
		objs:     make(chan []byte, cfg.MaxInflight),
		entropy:  ulid.Monotonic(cryptorand.Reader, 0),
	}, nil
}

// Write implements Writer.
func (b *Buffered) Write(ctx context.Context, reqs []Request) ([]Result, error) {
	wait, err := b.Submit(ctx, reqs)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// Submit buffers reqs as Write does and returns once they are in the buffer, with the
// wait that answers what Write would. A connection that pipelines requests (the Kafka
// gateway) submits them in order and waits for each answer later: requests submitted one
// after another are buffered in that order, so an idempotent producer's pipelined
// requests reach the sequencer in sequence order (see the package comment).
func (b *Buffered) Submit(ctx context.Context, reqs []Request) (func(ctx context.Context) ([]Result, error), error) {
	if len(reqs) == 0 {
		return func(context.Context) ([]Result, error) { return nil, nil }, nil
	}
	if err := b.checkSequencer(ctx); err != nil {
		return nil, err
	}
	if err := checkRequests(reqs); err != nil {
		return nil, err
	}
	size := 0
	for _, r := range reqs {
		size += len(r.Batches)
	}
	if err := b.pending.acquire(ctx, int64(size)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCommitFailed, err)
	}
	w := &waiter{results: make([]Result, len(reqs)), done: make(chan struct{})}

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.pending.release(int64(size))
		return nil, ErrClosed
	}
	if b.cur != nil && !b.fitsLocked(b.cur, reqs) {
		b.cutLocked(b.cur)
	}
	if b.cur == nil {
		b.cur = &buffer{chunks: make(map[chunkKey]*chunkBuf)}
		cur := b.cur
		cur.timer = time.AfterFunc(b.cfg.FlushInterval, func() { b.cut(cur) })
	}
	buf := b.cur
	for i, r := range reqs {
		k := chunkKey{r.StreamID, r.Partition}
		c := buf.chunks[k]
		if c == nil {
			c = &chunkBuf{producer: r.Producer, encoding: r.Encoding}
			buf.chunks[k] = c
			if r.Producer.Has() {
				buf.producers = true
			}
		}
		if len(c.slots) > 0 && r.Producer.Has() {
			c.joined, buf.joined = true, true // fitsLocked let it join
		}
		c.slots = append(c.slots, slot{w: w, i: i, before: c.records})
		if r.Checksummed && len(c.sums) == len(c.parts) {
			c.sums = append(c.sums, r.Checksum)
		}
		c.parts = append(c.parts, r.Batches)
		c.records += r.Records
		c.maxTS = max(c.maxTS, r.MaxTimestamp)
	}
	buf.bytes += size
	buf.waiters = append(buf.waiters, w)
	if buf.bytes >= b.cfg.MaxBufferBytes {
		b.cutLocked(buf)
	}
	b.mu.Unlock()

	return func(ctx context.Context) ([]Result, error) {
		select {
		case <-w.done:
			if w.err != nil && w.refused == 0 {
				return nil, w.err
			}
			return w.results, w.err
		case <-ctx.Done():
			select {
			case <-w.done: // answered as ctx ended: the answer is known
				if w.err != nil && w.refused == 0 {
					return nil, w.err
				}
				return w.results, w.err
			default:
			}
			return nil, fmt.Errorf("%w: %w", ErrCommitUnknown, ctx.Err())
		}
	}, nil
}

// cut flushes buf if it is still the current buffer (the timer path).
func (b *Buffered) cut(buf *buffer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur == buf {
		b.cutLocked(buf)
	}
}

func (b *Buffered) cutLocked(buf *buffer) {
	buf.timer.Stop()
	b.cur = nil
	if buf.producers {
		buf.afterStart, buf.afterCommit = b.lastStarted, b.lastCommitted
		buf.started, buf.committed = make(chan struct{}), make(chan struct{})
		b.lastStarted, b.lastCommitted = buf.started, buf.committed
		b.chain++
		buf.inChain = true
	}
	b.flushes.Add(1)
	go func() {
		defer b.flushes.Done()
		if buf.afterStart != nil {
			<-buf.afterStart // the previous producer buffer takes its slot first
		}
		b.inflight <- struct{}{}
		defer func() { <-b.inflight }()
		if buf.started != nil {
			close(buf.started)
			defer b.committedProducers(buf)
		}
		b.flush(buf)
		b.pending.release(int64(buf.bytes))
	}()
}

// closeOnce closes c unless it is closed already.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// fitsLocked reports whether reqs can join buf: no request with a producer to a partition
// buf has a chunk of, and no request to a partition whose chunk carries a producer; except
// that while mergeDepth or more buffers with producers wait for their commit, a
// producer's request that continues its chunk (same producer and epoch, the next
// sequence) joins it, so a pipelining producer's requests commit together instead of one
// commit each in turn.
func (b *Buffered) fitsLocked(buf *buffer, reqs []Request) bool {
	for _, r := range reqs {
		c := buf.chunks[chunkKey{r.StreamID, r.Partition}]
		if c == nil || (!r.Producer.Has() && !c.producer.Has()) {
			continue
		}
		if b.chain >= mergeDepth && b.joins(c, r) {
			continue
		}
		return false
	}
	return true
}

// joins reports whether producer request r continues chunk c.
func (b *Buffered) joins(c *chunkBuf, r Request) bool {
	p := r.Producer
	if !p.Has() || c.producer.ID != p.ID || c.producer.Epoch != p.Epoch ||
		!meta.NextSequence(meta.LastSequence(c.producer.BaseSequence, c.records), p.BaseSequence) {
		return false
	}
	until, ok := b.noMerge[p.ID]
	return !ok || b.cfg.Now().After(until)
}

// mergeDepth is how many buffers with producers must wait for their commit before a
// producer's next requests join its chunk: two, so one buffer's PUT overlaps the commit
// of the one before it.
const mergeDepth = 2

// noMergeFor is how long a producer's requests are not joined after a joined chunk of it
// was refused out of order, and noMergeMax how many such producers are remembered.
const (
	noMergeFor = time.Minute
	noMergeMax = 4096
)

// errJoinedRefused answers the requests of a joined chunk refused out of order: one of
// them may be a retry of what was committed (a duplicate) and the next new, which one
// chunk cannot say. Nothing was written; their retries are not joined (noMergeFor), so
// each is answered on its own.
var errJoinedRefused = errors.New("the request was committed in one chunk with the producer's next requests to the partition, and the sequencer refused that chunk's sequences; retry it")

// committedProducers ends buffer buf's turn in the commit order of buffers with
// producers (its commit was answered, or its flush ended before): the next one may
// commit, and a buffer whose producers' requests joined while it waited is cut.
func (b *Buffered) committedProducers(buf *buffer) {
	closeOnce(buf.committed)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !buf.inChain {
		return
	}
	buf.inChain = false
	b.chain--
	if b.chain < mergeDepth && b.cur != nil && b.cur.joined {
		b.cutLocked(b.cur)
	}
}

// refuseJoins stops joining producer id's requests for noMergeFor.
func (b *Buffered) refuseJoins(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	if b.noMerge == nil || len(b.noMerge) >= noMergeMax {
		for k, until := range b.noMerge {
			if now.After(until) {
				delete(b.noMerge, k)
			}
		}
		if b.noMerge == nil || len(b.noMerge) >= noMergeMax {
			b.noMerge = make(map[int64]time.Time)
		}
	}
	b.noMerge[id] = now.Add(noMergeFor)
}

// checkRequests refuses producer fields out of range and, in one Write, two requests of
// one partition of which one carries a producer (they would share a chunk).
func checkRequests(reqs []Request) error {
	var seen map[chunkKey]bool
	for i, r := range reqs {
		if !r.Producer.Has() {
			continue
		}
		if r.Producer.Epoch < 0 || r.Producer.BaseSequence < 0 {
			return fmt.Errorf("%w: request %d: producer %d with epoch %d and base sequence %d: want both >= 0",
				ErrInvalidRequest, i, r.Producer.ID, r.Producer.Epoch, r.Producer.BaseSequence)
		}
		if seen == nil {
			seen = make(map[chunkKey]bool, len(reqs))
		}
		seen[chunkKey{r.StreamID, r.Partition}] = true
	}
	if seen == nil {
		return nil
	}
	count := make(map[chunkKey]int, len(seen))
	for i, r := range reqs {
		k := chunkKey{r.StreamID, r.Partition}
		if count[k]++; count[k] > 1 && seen[k] {
			return fmt.Errorf("%w: request %d: stream %d partition %d has another request in this write, and one carries a producer",
				ErrInvalidRequest, i, r.StreamID, r.Partition)
		}
	}
	return nil
}

// Close flushes what is buffered and waits for in-flight flushes.
func (b *Buffered) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	if b.cur != nil {
		b.cutLocked(b.cur)
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.flushes.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Buffered) newULID(t time.Time) ulid.ULID {
	b.ulidMu.Lock()
	defer b.ulidMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), b.entropy)
}

// flush writes one buffer as a WAL object, commits it and answers its waiters.
func (b *Buffered) flush(buf *buffer) {
	start := b.cfg.Now()
	keys := make([]chunkKey, 0, len(buf.chunks))
	for k := range buf.chunks {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y chunkKey) int {
		if x.stream != y.stream {
			if x.stream < y.stream {
				return -1
			}
			return 1
		}
		return int(x.partition) - int(y.partition)
	})
	// A chunk's requests go into the object as parts: each request's bytes are copied
	// once, into the object, never joined first.
	chunks := make([]walfmt.Chunk, len(keys))
	for i, k := range keys {
		c := buf.chunks[k]
		enc := c.encoding
		if enc == 0 {
			enc = walfmt.EncodingKafka
		}
		chunks[i] = walfmt.Chunk{StreamID: k.stream, Partition: k.partition, Encoding: enc,
			Records: c.records, MaxTimestamp: c.maxTS, Parts: c.parts}
		if len(c.sums) == len(c.parts) {
			chunks[i].PartCRCs = c.sums
		}
	}
	id := b.newULID(start)
	chunks, plain := b.seal(buf, walfmt.ObjectKey(b.cfg.Class, b.cfg.NodeID, id), chunks) // seal.go
	if len(chunks) == 0 {
		b.answer(buf)
		return
	}
	obj, refs, err := walfmt.AppendObject(b.objBuf(buf.bytes+(walfmt.ChunkHeaderSize+walfmt.IndexEntrySize)*len(chunks)+512), walfmt.Header{NodeID: b.cfg.NodeID, ULID: id, Class: b.cfg.Class}, chunks)
	if err != nil {
		b.fail(buf, fmt.Errorf("%w: encode wal object: %w", ErrCommitFailed, err))
		return
	}
	key := walfmt.ObjectKey(b.cfg.Class, b.cfg.NodeID, id)
	deadline := ulid.Time(id.Time()).Add(b.cfg.Budget)

	reusable, err := b.put(key, obj, deadline)
	if err != nil {
		b.fail(buf, fmt.Errorf("%w: put %s: %w", ErrCommitFailed, key, err))
		return
	}
	if reusable {
		b.reuseObj(obj)
	}
	putDone := b.cfg.Now()

	cw := meta.CommitWal{NodeID: b.cfg.NodeID, Object: key, Class: b.cfg.Class.String(), CreatedMs: int64(id.Time()),
		Chunks: make([]meta.Chunk, len(refs))}
	for i, r := range refs {
		cw.Chunks[i] = meta.Chunk{StreamID: r.StreamID, Partition: r.Partition, Records: r.Records,
			Offset: r.Offset, Length: r.Length, MaxTimestamp: r.MaxTimestamp,
			Producer: buf.chunks[chunkKey{r.StreamID, r.Partition}].producer}
	}
	if buf.afterCommit != nil {
		<-buf.afterCommit // commit in cut order after the previous producer buffer
	}
	res, err := b.commit(cw, deadline)
	if buf.committed != nil {
		b.committedProducers(buf)
	}
	if err != nil {
		b.fail(buf, fmt.Errorf("commit %s: %w", key, err))
		return
	}
	if m := b.cfg.Metrics; m != nil {
		m.observeFlush(len(obj), len(refs), putDone.Sub(start), b.cfg.Now().Sub(putDone))
	}

	// Each request is answered by its own chunk. A refusal is definite, even after an
	// attempt whose outcome was unknown: it is part of the sequencer's answer to this
	// object, and the object's first answer is its only one (a retry is answered from its
	// dedupe record, which outlives the writer budget: meta.DedupeWindow is 30 minutes,
	// the budget 60 s from the object's creation). So the refused chunk was not and never
	// will be committed under this object.
	committed := make([]Committed, 0, len(refs))
	refused := 0
	for i, r := range refs {
		c := buf.chunks[chunkKey{r.StreamID, r.Partition}]
		if cerr := res.ChunkErr(i); cerr != nil {
			refused++
			if c.joined && errors.Is(cerr, meta.ErrOutOfOrderSequence) {
				b.refuseJoins(c.producer.ID)
				cerr = errJoinedRefused
			}
			err := fmt.Errorf("%w: commit %s: stream %d partition %d: %w", ErrCommitFailed, key, r.StreamID, r.Partition, cerr)
			for _, s := range c.slots {
				s.w.results[s.i] = Result{BaseOffset: -1, Token: res.AppliedIndex, Err: err}
				s.w.refused++
			}
			continue
		}
		base := res.BaseOffsets[i]
		dup := res.IsDuplicate(i)
		for _, s := range c.slots {
			s.w.results[s.i] = Result{BaseOffset: base + s.before, Token: res.AppliedIndex, Duplicate: dup}
		}
		if dup {
			if m := b.cfg.Metrics; m != nil {
				m.duplicateChunks.Inc()
			}
			continue // committed by an earlier object: nothing new for the tail cache
		}
		committed = append(committed, Committed{StreamID: r.StreamID, Partition: r.Partition, Token: res.AppliedIndex,
			Entry: meta.IndexEntry{BaseOffset: base, Count: r.Records, Kind: meta.KindWAL, Object: key,
				Offset: r.Offset, Length: r.Length, MaxTimestamp: r.MaxTimestamp},
			Batches: committedBatches(c, plain, i, base)})
	}
	if refused > 0 {
		b.cfg.Logger.Warn("wal chunks refused", "object", key, "refused", refused, "chunks", len(refs))
		if m := b.cfg.Metrics; m != nil {
			m.refusedChunks.Add(float64(refused))
		}
	}
	if b.cfg.OnCommit != nil && len(committed) > 0 {
		b.cfg.OnCommit(committed)
	}
	b.answer(buf)
}

// answer answers a flushed buffer's waiters from their results.
func (b *Buffered) answer(buf *buffer) {
	for _, w := range buf.waiters {
		w.finish()
		close(w.done)
	}
}

func (b *Buffered) fail(buf *buffer, err error) {
	b.cfg.Logger.Warn("wal flush failed", "err", err, "requests", len(buf.waiters), "bytes", buf.bytes)
	if m := b.cfg.Metrics; m != nil {
		m.flushErrors.Inc()
	}
	for _, w := range buf.waiters {
		w.err = err
		close(w.done)
	}
}

// objBuf returns an empty buffer of capacity >= n for a WAL object: a reused one when one
// is free and large enough, else a new one.
func (b *Buffered) objBuf(n int) []byte {
	select {
	case o := <-b.objs:
		if cap(o) >= n {
			return o[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}

// reuseObj keeps a WAL object's buffer for a later flush, unless the free list is full or
// the buffer is over twice the buffer size (one large Write): the list holds at most
// MaxInflight buffers of at most 2 × MaxBufferBytes.
func (b *Buffered) reuseObj(o []byte) {
	if cap(o) > 2*b.cfg.MaxBufferBytes {
		return
	}
	select {
	case b.objs <- o:
	default:
	}
}

// put writes the WAL object with If-None-Match: *, retrying until deadline. A precondition
// failure after an attempt whose outcome is unknown means that attempt landed: the key has
// a fresh ULID no other writer uses, which a byte comparison confirms. Until a GET proves
// it (the GET failed, or came back short or different), the object is not known written
// and the put goes on retrying; it is never committed unproven. reusable reports a PUT that
// succeeded at its first attempt: the bucket answered it, so nothing reads obj any more and
// its buffer may be reused (after a failed attempt a transport may still be sending it).
func (b *Buffered) put(key string, obj []byte, deadline time.Time) (reusable bool, err error) {
	backoff := 20 * time.Millisecond
	attempted := false
	for {
		ctx, cancel := b.budgetContext(deadline)
		err := b.cfg.Bucket.Put(ctx, key, obj, objstore.IfAbsent())
		unproven := false
		if errors.Is(err, objstore.ErrPreconditionFailed) && attempted {
			got, gerr := b.cfg.Bucket.Get(ctx, key)
			switch {
			case gerr == nil && string(got) == string(obj):
				err = nil
			case gerr != nil:
				err, unproven = fmt.Errorf("%w; reading it back to prove it ours: %w", err, gerr), true
			default:
				err, unproven = fmt.Errorf("%w; read back %d bytes that are not the %d written", err, len(got), len(obj)), true
			}
		}
		cancel()
		if err == nil || (!unproven && (errors.Is(err, objstore.ErrPreconditionFailed) || errors.Is(err, objstore.ErrInvalidKey))) {
			return err == nil && !attempted, err
		}
		attempted = true
		b.cfg.Logger.Warn("wal put failed, retrying", "key", key, "err", err)
		if !b.sleep(&backoff, deadline) {
			return false, err
		}
	}
}

// commit runs CommitWal attempts until one settles the outcome or the budget runs out.
func (b *Buffered) commit(cw meta.CommitWal, deadline time.Time) (meta.CommitResult, error) {
	backoff := 20 * time.Millisecond
	unknown := false
	for {
		cw.StampMs = b.cfg.Now().UnixMilli()
		ctx, cancel := b.budgetContext(deadline)
		res, err := b.cfg.Meta.CommitWal(ctx, cw)
		cancel()
		if err == nil {
			b.unreachable.Store(false)
			if err := checkAnswer(res, len(cw.Chunks)); err != nil {
				// The commit happened, but which chunk got what cannot be told.
				return res, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
			}
			return res, nil
		}
		if errors.Is(err, meta.ErrUnavailable) {
			b.unreachable.Store(true)
		}
		switch {
		case errors.Is(err, meta.ErrUnavailable):
			// Checked first: an error that says the call did not complete leaves the
			// outcome unknown, whatever else it wraps.
			unknown = true
		case errors.Is(err, meta.ErrNotLeader):
			// Not proposed: the outcome is still what it was.
		case definitive(err):
			if unknown {
				return res, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
			}
			return res, fmt.Errorf("%w: %w", ErrCommitFailed, err)
		default:
			unknown = true
		}
		b.cfg.Logger.Warn("commit attempt failed", "object", cw.Object, "err", err, "unknown", unknown)
		if !b.sleep(&backoff, deadline) {
			if unknown {
				return res, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
			}
			return res, fmt.Errorf("%w: %w", ErrCommitFailed, err)
		}
	}
}

// checkAnswer checks a CommitWal answer's shape against the n chunks sent: one base offset
// per chunk (at least 0 for a committed chunk) and no status or one per chunk.
func checkAnswer(res meta.CommitResult, n int) error {
	if len(res.BaseOffsets) != n {
		return fmt.Errorf("sequencer answered %d offsets for %d chunks", len(res.BaseOffsets), n)
	}
	if len(res.Status) != 0 && len(res.Status) != n {
		return fmt.Errorf("sequencer answered %d chunk statuses for %d chunks", len(res.Status), n)
	}
	for i, base := range res.BaseOffsets {
		if base < 0 && res.ChunkErr(i) == nil {
			return fmt.Errorf("sequencer answered base offset %d for committed chunk %d", base, i)
		}
	}
	return nil
}

// definitive errors settle a commit attempt: the sequencer refused the whole object (or,
// for ErrStreamNotFound and ErrPartitionNotFound, a sequencer that answers all or nothing
// refused one of its chunks). Nothing was committed if no earlier attempt's outcome was
// unknown.
func definitive(err error) bool {
	for _, e := range []error{meta.ErrStaleCommit, meta.ErrClockAhead, meta.ErrInvalidArgument,
		meta.ErrStreamNotFound, meta.ErrPartitionNotFound, meta.ErrNamespaceNotFound} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// budgetContext is a context ending at deadline, a time on the node's clock (Config.Now):
// contexts end on the real clock, so a node whose clock is off must move the deadline
// onto it, or every call would fail at once (a slow clock) or outlive the budget (a fast
// one).
func (b *Buffered) budgetContext(deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), deadline.Sub(b.cfg.Now()))
}

// sleep waits the backoff (doubling it, capped) unless that passes deadline.
func (b *Buffered) sleep(backoff *time.Duration, deadline time.Time) bool {
	d := *backoff + rand.N(*backoff/2+1)
	if b.cfg.Now().Add(d).After(deadline) {
		return false
	}
	time.Sleep(d)
	*backoff = min(*backoff*2, 2*time.Second)
	return true
}

// patchOffsets sets each batch's baseOffset in a chunk's parts to its offset, in place,
// and returns the parts: the WAL object holds its own copy, and the request bytes are the
// writer's once written. Part j starts at base plus the offsets of the requests before it
// (slot j's before). The batches were validated at produce, so this walks their framing
// without a second CRC pass.
// An arrow chunk holds no offsets and is returned as it is.
func patchOffsets(c *chunkBuf, base int64) [][]byte {
	if c.encoding != 0 && c.encoding != walfmt.EncodingKafka {
		return c.parts
	}
	for j, part := range c.parts {
		_ = recordbatch.SetBaseOffsets(part, base+c.slots[j].before) // validated at produce: cannot fail
	}
	return c.parts
}

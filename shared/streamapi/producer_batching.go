package streamapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/recordbatch"
)

// BatchTransport is what a Producer sends through: *Client (the HTTP binary path) and
// *GRPCClient (gRPC) implement it.
type BatchTransport interface {
	InitProducer(ctx context.Context, ns string, req InitProducerRequest) (ProducerID, error)
	// ProduceBatches appends whole RecordBatch v2 batches to one partition; the answer has
	// one offset per batch.
	ProduceBatches(ctx context.Context, ns, stream string, partition int32, batches []byte) (ProduceResponse, error)
	// Partitions is the stream's partition count.
	Partitions(ctx context.Context, ns, stream string) (int32, error)
}

// ProduceBatches appends RecordBatch v2 bytes (one or more whole batches) to one partition
// over the binary path (POST …/records?partition=, Content-Type MediaRecordBatch); the
// answer has one offset per batch. Batches carrying a producer in their headers make it
// an idempotent produce.
func (c *Client) ProduceBatches(ctx context.Context, ns, stream string, partition int32, batches []byte) (ProduceResponse, error) {
	var res ProduceResponse
	if err := checkNames("produce", ns, stream); err != nil {
		return res, err
	}
	q := url.Values{"partition": {strconv.FormatInt(int64(partition), 10)}}
	err := c.do(ctx, "produce", http.MethodPost, streamPath(ns, stream)+"/records", q, batchBody(batches), &res, 0)
	return res, err
}

// Partitions is the partition count of ns/stream, cached for PartitionCacheTTL.
func (c *Client) Partitions(ctx context.Context, ns, stream string) (int32, error) {
	return c.partitions(ctx, ns, stream)
}

// ProducerConfig tunes a Producer; zero fields take the defaults.
type ProducerConfig struct {
	// Name makes the producer a named one: initializing it fences the previous holder of
	// the name (empty: an anonymous producer).
	Name string
	// Linger is how long a partition's first pending record waits for more to fill its
	// batch (default 5 ms; negative: none, a batch leaves as soon as the previous one is
	// answered).
	Linger time.Duration
	// BatchRecords and BatchBytes bound one request (defaults 1,000 records, 1 MiB of
	// keys and values).
	BatchRecords int
	BatchBytes   int
	// MaxBuffered bounds the bytes (keys and values) sent to the producer and not yet
	// answered: Send blocks past it (default 32 MiB). With BatchBytes it bounds the
	// producer's memory.
	MaxBuffered int
	// MaxRetryTime bounds the retries of one batch whose outcome is unknown (default 2
	// minutes); its records then fail with the last error.
	MaxRetryTime time.Duration
	// Compression of the batches (default none).
	Compression recordbatch.Compression
	// MaxInFlight bounds the requests of one partition sent and not yet answered (default
	// and at most MaxProducerInFlight, as Kafka's max.in.flight.requests.per.connection
	// for an idempotent producer; 1 sends one batch at a time).
	MaxInFlight int
}

// MaxProducerInFlight is the most requests a Producer keeps in flight per partition: the
// batches per producer and partition the sequencer remembers to answer a retry
// (meta.ProducerBatches), so a retry of any of them is still recognised.
const MaxProducerInFlight = 5

func (c ProducerConfig) withDefaults() ProducerConfig {
	if c.Linger == 0 {
		c.Linger = 5 * time.Millisecond
	}
	if c.BatchRecords <= 0 {
		c.BatchRecords = 1000
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = 1 << 20
	}
	if c.MaxBuffered <= 0 {
		c.MaxBuffered = 32 << 20
	}
	c.MaxBuffered = max(c.MaxBuffered, c.BatchBytes)
	if c.MaxRetryTime <= 0 {
		c.MaxRetryTime = 2 * time.Minute
	}
	if c.MaxInFlight <= 0 || c.MaxInFlight > MaxProducerInFlight {
		c.MaxInFlight = MaxProducerInFlight
	}
	return c
}

// ErrProducerClosed: Send after Close.
var ErrProducerClosed = errors.New("streamapi: producer closed")

// Producer is an idempotent producer of one stream that batches: Send queues a record and
// returns at once; each partition's records leave as one RecordBatch v2 batch (carrying
// the producer id, epoch and the partition's next sequence in its header) when the batch
// is full or its first record has lingered ProducerConfig.Linger, up to MaxInFlight
// requests per partition in flight. Each batch takes its sequences when it leaves, so the
// partition's batches carry consecutive sequences in the order they were cut; one that
// reaches the sequencer before an earlier one still in flight is refused as
// out_of_order_sequence and resent once the earlier one is answered, so batches commit in
// sequence order and records in the order they were sent. A request whose outcome is
// unknown (no answer, a retriable error) is resent with the same bytes until it is
// answered: the sequencer answers a batch it committed before with its original offsets,
// so a retry never writes twice and nothing acknowledged is lost. After a definite refusal
// (out_of_order_sequence with no earlier batch in flight, producer_fenced,
// unknown_producer, bad input) the batch's records fail, and so do those of the later
// batches in flight behind it; once they are all answered the partition's sequence goes
// back to the first failed batch's. It works over HTTP (*Client) and gRPC (*GRPCClient)
// alike. Memory: at most MaxBuffered bytes of records, plus the built bytes of up to
// MaxInFlight batches per partition being sent.
type Producer struct {
	t          BatchTransport
	ns, stream string
	cfg        ProducerConfig
	id         ProducerID
	n          int32 // partitions

	mu       sync.Mutex
	space    *sync.Cond // signalled when buffered bytes go down
	buffered int
	parts    map[int32]*partQueue
	rr       uint32
	closed   bool
	wg       sync.WaitGroup
	stop     chan struct{}
}

// partQueue is one partition's pending records and its sender's state.
type partQueue struct {
	pending  []pendingRecord
	bytes    int
	first    time.Time // when the oldest pending record came
	next     int32     // the sequence of the next batch cut
	wake     chan struct{}
	inflight []*flight // sent and not answered, in sequence order
	cut      int64     // batches cut so far (flight.ord)
	// broken: a batch failed while others were in flight; no batch is cut until all are
	// answered, then next goes back to rewind (the first failed batch's sequence).
	broken  bool
	rewind  int32
	flushes []chan struct{}
}

// flight is one batch in flight. prev is the batch cut before it on the partition, if that
// one was still in flight then; done is closed once it is answered, err set before.
type flight struct {
	seq  int32
	ord  int64 // the partition's batches cut before it
	prev *flight
	done chan struct{}
	err  error
}

func (f *flight) answered() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

type pendingRecord struct {
	rec  recordbatch.Record
	size int
	ack  *Ack
}

// Ack is the outcome of one record Send queued.
type Ack struct {
	done chan struct{}
	off  RecordOffset
	err  error
}

// Done is closed once the record is answered.
func (a *Ack) Done() <-chan struct{} { return a.done }

// Wait returns where the record landed, or why it did not, once answered (or ctx's error
// if ctx ends first; the record stays queued).
func (a *Ack) Wait(ctx context.Context) (RecordOffset, error) {
	select {
	case <-a.done:
		return a.off, a.err
	case <-ctx.Done():
		return RecordOffset{Partition: -1, Offset: -1}, ctx.Err()
	}
}

// NewProducer initializes a producer of ns (cfg.Name: a named one) for stream over t.
func NewProducer(ctx context.Context, t BatchTransport, ns, stream string, cfg ProducerConfig) (*Producer, error) {
	if err := checkNames("producer", ns, stream); err != nil {
		return nil, err
	}
	n, err := t.Partitions(ctx, ns, stream)
	if err != nil {
		return nil, err
	}
	id, err := t.InitProducer(ctx, ns, InitProducerRequest{Name: cfg.Name})
	if err != nil {
		return nil, err
	}
	p := &Producer{t: t, ns: ns, stream: stream, cfg: cfg.withDefaults(), id: id, n: n, parts: map[int32]*partQueue{}, stop: make(chan struct{})}
	p.space = sync.NewCond(&p.mu)
	return p, nil
}

// ID is the producer's id and epoch.
func (p *Producer) ID() ProducerID { return p.id }

// Send queues r and returns its Ack. r goes to r.Partition, else murmur2 of its key modulo
// the partition count, else round-robin by batch. It blocks while MaxBuffered bytes are
// queued and unanswered (until ctx ends).
func (p *Producer) Send(ctx context.Context, r Record) (*Ack, error) {
	if r.Offset != nil {
		return nil, fmt.Errorf("streamapi: send %s/%s: an offset is assigned by the log and cannot be produced: %w", p.ns, p.stream, ErrInvalidRecord)
	}
	br, err := batchRecord(r, time.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("streamapi: send %s/%s: %w", p.ns, p.stream, err)
	}
	size := recordSize(&br)
	if size > p.cfg.MaxBuffered {
		return nil, fmt.Errorf("streamapi: send %s/%s: a record of %d bytes is larger than MaxBuffered %d: %w", p.ns, p.stream, size, p.cfg.MaxBuffered, ErrInvalidArgument)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { p.mu.Lock(); p.space.Broadcast(); p.mu.Unlock() })
		defer stop()
	}
	for !p.closed && p.buffered+size > p.cfg.MaxBuffered && ctx.Err() == nil {
		p.space.Wait()
	}
	if p.closed {
		return nil, ErrProducerClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var part int32
	switch {
	case r.Partition != nil:
		if part = *r.Partition; part < 0 || part >= p.n {
			return nil, fmt.Errorf("streamapi: send %s/%s: partition %d: the stream has partitions 0..%d: %w", p.ns, p.stream, part, p.n-1, ErrInvalidArgument)
		}
	case br.Key != nil:
		part = KeyPartition(br.Key, p.n)
	default:
		part = int32(p.rr % uint32(p.n))
		if q := p.parts[part]; q != nil && len(q.pending)+1 >= p.cfg.BatchRecords {
			p.rr++ // this batch is full: the next keyless records go to the next partition
		}
	}
	q := p.parts[part]
	if q == nil {
		q = &partQueue{wake: make(chan struct{}, 1)}
		p.parts[part] = q
		p.wg.Add(1)
		go p.sender(part, q)
	}
	a := &Ack{done: make(chan struct{})}
	if len(q.pending) == 0 {
		q.first = time.Now()
	}
	q.pending = append(q.pending, pendingRecord{rec: br, size: size, ack: a})
	q.bytes += size
	p.buffered += size
	if len(q.pending) >= p.cfg.BatchRecords || q.bytes >= p.cfg.BatchBytes || p.cfg.Linger < 0 {
		q.signal()
	} else if len(q.pending) == 1 {
		q.signal() // the sender starts the linger timer
	}
	return a, nil
}

func (q *partQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Flush sends what is queued at once and waits until every record queued before it is
// answered (or ctx ends).
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	var waits []chan struct{}
	for _, q := range p.parts {
		if len(q.pending) == 0 && len(q.inflight) == 0 {
			continue
		}
		c := make(chan struct{})
		q.flushes = append(q.flushes, c)
		waits = append(waits, c)
		q.signal()
	}
	p.mu.Unlock()
	for _, c := range waits {
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close flushes (until ctx ends) and stops the producer; later Sends fail with
// ErrProducerClosed.
func (p *Producer) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
		p.space.Broadcast()
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sender sends partition part's batches, up to MaxInFlight at once, in sequence order.
func (p *Producer) sender(part int32, q *partQueue) {
	defer p.wg.Done()
	var timer *time.Timer
	for {
		p.mu.Lock()
		flushing := len(q.flushes) > 0
		// The window counts from the oldest batch not answered, answered ones after it
		// included: a batch whose retry is pending stays among the last MaxInFlight the
		// sequencer remembers, so that retry is still recognised as a duplicate.
		canSend := !q.broken && (len(q.inflight) == 0 || q.cut-q.inflight[0].ord < int64(p.cfg.MaxInFlight))
		ready := canSend && len(q.pending) > 0 && (flushing || p.closed || p.cfg.Linger < 0 || len(q.pending) >= p.cfg.BatchRecords ||
			q.bytes >= p.cfg.BatchBytes || time.Since(q.first) >= p.cfg.Linger)
		if !ready {
			if len(q.pending) == 0 && len(q.inflight) == 0 && flushing {
				for _, c := range q.flushes {
					close(c)
				}
				q.flushes = nil
			}
			var wait <-chan time.Time
			if len(q.pending) > 0 && canSend {
				d := p.cfg.Linger - time.Since(q.first)
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				wait = timer.C
			}
			closed := p.closed && len(q.pending) == 0 && len(q.inflight) == 0
			p.mu.Unlock()
			if closed {
				return
			}
			select {
			case <-q.wake:
			case <-wait:
			case <-p.stop:
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}
		// Take one batch's worth.
		n, bytes := 0, 0
		for n < len(q.pending) && n < p.cfg.BatchRecords && (n == 0 || bytes+q.pending[n].size <= p.cfg.BatchBytes) {
			bytes += q.pending[n].size
			n++
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.bytes -= bytes
		if len(q.pending) > 0 {
			q.first = time.Now()
		}
		f := &flight{seq: q.next, ord: q.cut, done: make(chan struct{})}
		q.cut++
		if k := len(q.inflight); k > 0 {
			f.prev = q.inflight[k-1]
		}
		q.inflight = append(q.inflight, f)
		q.next = nextSequence(f.seq, int64(n))
		p.wg.Add(1)
		p.mu.Unlock()

		go func() {
			defer p.wg.Done()
			off, err := p.send(part, f, batch)
			f.prev = nil // read only by send: the chain of flights stays as long as the window
			p.mu.Lock()
			q.inflight = slices.DeleteFunc(q.inflight, func(x *flight) bool { return x == f })
			f.err = err
			close(f.done)
			if err != nil && (!q.broken || seqBefore(f.seq, q.rewind)) {
				q.broken, q.rewind = true, f.seq
			}
			if q.broken && len(q.inflight) == 0 {
				q.next, q.broken = q.rewind, false
			}
			p.buffered -= bytes
			p.space.Broadcast()
			p.mu.Unlock()
			for i, r := range batch {
				if err != nil {
					r.ack.off, r.ack.err = RecordOffset{Partition: part, Offset: -1}, err
				} else {
					r.ack.off = RecordOffset{Partition: part, Offset: off + int64(i)}
				}
				close(r.ack.done)
			}
			q.signal()
		}()
	}
}

// seqBefore reports whether sequence a comes before b among the few batches in flight
// (sequences wrap after math.MaxInt32 to 0).
func seqBefore(a, b int32) bool { return a != b && uint32(b-a) < 1<<30 }

// send builds the batch at f's sequence and sends it until answered: the base offset, or
// the definite refusal (or the last error once MaxRetryTime has passed). Refused as
// out_of_order_sequence while the batch before it is in flight (this one overtook it), it
// waits for that one's answer and is sent again, or fails if that one failed.
func (p *Producer) send(part int32, f *flight, batch []pendingRecord) (int64, error) {
	seq := f.seq
	recs := make([]recordbatch.Record, len(batch))
	for i, r := range batch {
		recs[i] = r.rec
	}
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = p.cfg.Compression
	opt.ProducerID, opt.ProducerEpoch, opt.BaseSequence = p.id.ProducerID, p.id.Epoch, seq
	body, err := recordbatch.Append(nil, recs, opt)
	if err != nil {
		return -1, fmt.Errorf("streamapi: send %s/%s: build the batch of partition %d: %w", p.ns, p.stream, part, err)
	}
	deadline := time.Now().Add(p.cfg.MaxRetryTime)
	backoff := 20 * time.Millisecond
	for {
		behind := f.prev != nil && !f.prev.answered()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		res, err := p.t.ProduceBatches(ctx, p.ns, p.stream, part, body)
		cancel()
		if err == nil {
			if len(res.Offsets) != 1 {
				return -1, fmt.Errorf("streamapi: send %s/%s: %w: %d offsets for one batch", p.ns, p.stream, ErrBadResponse, len(res.Offsets))
			}
			return res.Offsets[0].Offset, nil
		}
		if behind && ErrorCode(err) == CodeOutOfOrderSequence {
			<-f.prev.done
			if f.prev.err != nil {
				return -1, fmt.Errorf("streamapi: send %s/%s: partition %d: the batch before this one failed: %w", p.ns, p.stream, part, f.prev.err)
			}
			continue // the earlier batch committed: this one follows it now
		}
		if !(IsRetriable(err) || errors.Is(err, context.DeadlineExceeded)) || time.Now().Add(backoff).After(deadline) {
			return -1, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

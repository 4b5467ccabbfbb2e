package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// Produce: versions 3-12 (RecordBatch v2; v13's topic ids are not served).
//
// Behaviour: every partition's records are validated as a broker does (framing, magic 2,
// CRC, decompression within the record limit, no control or transactional batches, each
// batch at most the topic's max.message.bytes, else Limits.MaxRecordBytes) and written as sent, never re-encoded; the
// partitions of the standard and express classes that pass commit together in one WAL
// object per class. Partitions of quorum topics go to the quorum writer (the journal,
// docs/quorum.md), which has no Submit: each partition is written on its own, after the
// connection's previous write to it ended, so pipelined requests still commit in the order
// sent (writeInOrder). acks 0, 1 and -1 all answer only once committed (for quorum: on a
// majority of the journal's members), except acks=0, which answers nothing. A batch of an
// idempotent producer (producer id set) is checked by the sequencer, or by the journal
// for a quorum topic: a retry of one of the last 5 batches answers success with its
// original offset, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch
// INVALID_PRODUCER_EPOCH, an unknown or expired producer UNKNOWN_PRODUCER_ID (the journal
// does not consult the sequencer's registry: it starts the producer's sequences at 0). A
// partition that fails answers its own error (errors.go); the others commit.
//
// Ignored: TimeoutMillis (Limits.ProduceWait bounds the wait instead); v8's ErrorRecords
// (a refused batch is refused whole).
const (
	produceMin = 3
	produceMax = 12
)

// producePart is one partition's validated share of a produce.
type producePart struct {
	t, p int // index in the response
	st   meta.Stream
	req  writer.Request
}

type ingestAdmitter interface {
	AdmitIngest(ctx context.Context, ns string, n int) error
}

// produce checks a produce and submits its partitions to the writers, in the order the
// connection's requests came (so a producer's pipelined requests are buffered in sequence
// order), and returns the wait that answers it once committed (nil response: acks=0).
func (c *conn) produce(ctx context.Context, r request) (func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return nil, closeConn("produce acks %d: want -1, 0 or 1", req.Acks)
	}
	// Partitions are checked first (in parallel when the request is large: validation
	// decompresses, and one connection carries all of a client's produce requests), then
	// taken in request order.
	var checks []partCheck
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		st, serr := c.s.cfg.Streams.Stream(ctx, c.ns, t.Topic)
		_, internal := group.InternalStream(c.ns, t.Topic)
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			var err error
			switch {
			case internal:
				rp.ErrorCode, err = kerr.InvalidTopicException.Code, fmt.Errorf("cannot produce to the internal topic %s", t.Topic)
			case req.TransactionID != nil:
				rp.ErrorCode, err = kerr.TransactionalIDAuthorizationFailed.Code, errors.New("transactions are not served: produce without a transactional id")
			case serr != nil:
				err = serr
				rp.ErrorCode = code(serr)
			case p.Partition < 0 || p.Partition >= st.Partitions:
				rp.ErrorCode, err = kerr.UnknownTopicOrPartition.Code, fmt.Errorf("topic %q has partitions 0..%d", t.Topic, st.Partitions-1)
			case st.Encoding == meta.EncodingArrow:
				rp.ErrorCode, err = kerr.InvalidRecord.Code, fmt.Errorf("topic %q is an arrow stream: produce its records as JSON over HTTP", t.Topic)
			default:
				checks = append(checks, partCheck{t: ti, p: pi, st: st, partition: p.Partition, records: p.Records})
			}
			if err != nil {
				rp.BaseOffset = -1
				rp.ErrorMessage = msg(err)
			}
		}
	}
	c.checkAll(checks)
	var parts []producePart
	size := 0
	for i := range checks {
		ck := &checks[i]
		rp := &resp.Topics[ck.t].Partitions[ck.p]
		err := ck.err
		rp.ErrorCode = ck.code
		if err == nil {
			if _, ok := c.s.cfg.Writers[ck.st.Class]; !ok {
				rp.ErrorCode, err = kerr.InvalidRequest.Code, fmt.Errorf("topic %q is of class %q, which this node does not serve", ck.st.Name, ck.st.Class)
			} else {
				c.adoptEpoch(ctx, ck.wr.Producer)
				parts = append(parts, producePart{t: ck.t, p: ck.p, st: ck.st, req: ck.wr})
				size += len(ck.wr.Batches)
			}
		}
		if err != nil {
			rp.BaseOffset = -1
			rp.ErrorMessage = msg(err)
		}
	}
	wait := func() {}
	if len(parts) > 0 {
		wait = c.submitParts(ctx, resp, parts, size)
	}
	return func() kmsg.Response {
		wait()
		if req.Acks == 0 {
			return nil
		}
		return resp
	}, nil
}

// partCheck is one partition of a produce being checked, and its outcome.
type partCheck struct {
	t, p      int // index in the response
	st        meta.Stream
	partition int32
	records   []byte

	wr   writer.Request
	code int16
	err  error
}

// parallelCheckBytes is the request size from which its partitions are checked in parallel.
const parallelCheckBytes = 256 << 10

// checkAll checks every partition of a produce: on min(GOMAXPROCS, partitions) goroutines
// when the request holds at least parallelCheckBytes of records, else on this one.
func (c *conn) checkAll(checks []partCheck) {
	total := 0
	for i := range checks {
		total += len(checks[i].records)
	}
	workers := min(runtime.GOMAXPROCS(0), len(checks))
	if workers <= 1 || total < parallelCheckBytes {
		for i := range checks {
			ck := &checks[i]
			ck.wr, ck.code, ck.err = c.checkBatches(ck.st, ck.partition, ck.records)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(checks) {
					return
				}
				ck := &checks[i]
				ck.wr, ck.code, ck.err = c.checkBatches(ck.st, ck.partition, ck.records)
			}
		}()
	}
	wg.Wait()
}

// adoptEpoch makes the sequencer take the epoch of an idempotent producer's first batch at
// that epoch (base sequence 0), when the client bumped it locally after a refused batch
// (KIP-360: kgo and the Java client do, and Kafka brokers accept epoch + 1 at sequence 0).
// It bumps the producer from epoch - 1 through InitProducer; a producer already there (the
// repeat of that bump) or elsewhere is left to the commit's check, which answers the batch.
// One bump is remembered per connection, so a producer's partitions ask once. Only a
// producer this node's InitProducerId issued to the namespace is bumped (issuedProducers):
// a batch naming any other id could otherwise make the sequencer allocate producers.
func (c *conn) adoptEpoch(ctx context.Context, p meta.ChunkProducer) {
	if p.ID <= 0 || p.Epoch <= 0 || p.BaseSequence != 0 || c.adopted == [2]int64{p.ID, int64(p.Epoch)} || !c.s.issued.has(p.ID, c.ns) {
		return
	}
	got, err := c.s.cfg.Meta.InitProducer(ctx, c.ns, "", p.ID, p.Epoch-1)
	if err == nil && got.ID == p.ID && got.Epoch == p.Epoch {
		c.adopted = [2]int64{p.ID, int64(p.Epoch)}
	}
}

// maxIssuedProducers bounds issuedProducers (about 40 bytes an entry).
const maxIssuedProducers = 100_000

// issuedProducers are the producer ids this node's InitProducerId answered, with their
// namespace: at most maxIssuedProducers (past it, half are dropped, arbitrary ones).
type issuedProducers struct {
	mu sync.Mutex
	m  map[int64]string
}

func (s *issuedProducers) add(id int64, ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int64]string{}
	}
	if _, ok := s.m[id]; !ok && len(s.m) >= maxIssuedProducers {
		for k := range s.m {
			if len(s.m) < maxIssuedProducers/2 {
				break
			}
			delete(s.m, k)
		}
	}
	s.m[id] = ns
}

func (s *issuedProducers) has(id int64, ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.m[id]
	return ok && got == ns
}

// checkBatches validates one partition's records as a broker does and builds its writer
// request, or answers the Kafka code and the reason it is refused.
func (c *conn) checkBatches(st meta.Stream, partition int32, records []byte) (writer.Request, int16, error) {
	if len(records) == 0 {
		return writer.Request{}, kerr.CorruptMessage.Code, errors.New("the partition's records are empty")
	}
	limit := int64(maxMessageBytes(st, c.s.cfg.Limits.MaxRecordBytes))
	// Sizes first: a batch over the limit (the topic's max.message.bytes, else the node's
	// record limit) is MESSAGE_TOO_LARGE before anything of it is decompressed. Framing
	// errors are left to Validate, which names them.
	for rest := records; len(rest) >= 12; {
		n := int64(binary.BigEndian.Uint32(rest[8:12])) + 12
		if n > limit {
			return writer.Request{}, kerr.MessageTooLarge.Code, fmt.Errorf("a batch of %d bytes is over the topic's max.message.bytes of %d", n, limit)
		}
		if n > int64(len(rest)) {
			break
		}
		rest = rest[n:]
	}
	bs, err := recordbatch.Validate(records)
	if err != nil {
		return writer.Request{}, code(err), err
	}
	wr := writer.Request{StreamID: st.ID, Partition: partition, Batches: records}
	var pc producerCheck
	for i := range bs {
		b := &bs[i]
		switch {
		case b.Control():
			return writer.Request{}, kerr.InvalidRecord.Code, errors.New("a control batch: only data batches can be produced")
		case b.Transactional():
			return writer.Request{}, kerr.TransactionalIDAuthorizationFailed.Code, errors.New("a transactional batch: transactions are not served")
		}
		if err := pc.add(b); err != nil {
			return writer.Request{}, kerr.InvalidRecord.Code, err
		}
		wr.Records += b.OffsetCount()
		wr.MaxTimestamp = max(wr.MaxTimestamp, b.MaxTimestamp)
		wr.Checksum = recordbatch.ChecksumAfter(wr.Checksum, *b) // Validate parsed all of records
	}
	wr.Checksummed = true
	if wr.MaxTimestamp <= 0 {
		wr.MaxTimestamp = c.s.cfg.Now().UnixMilli()
	}
	wr.Producer = pc.first
	return wr, 0, nil
}

// producerCheck checks the producer fields of one partition's batches as a broker does:
// a batch with producer id -1 carries no producer (its epoch and sequence are ignored:
// clients send sequence 0 there); batches with a producer are one producer's, one epoch,
// with consecutive sequences.
type producerCheck struct {
	first meta.ChunkProducer
	next  int32
	n     int
}

func (c *producerCheck) add(b *recordbatch.Batch) error {
	p := meta.ChunkProducer{ID: b.ProducerID, Epoch: b.ProducerEpoch, BaseSequence: b.BaseSequence}
	switch {
	case p.ID < 0:
		p = meta.ChunkProducer{ID: meta.NoProducer, Epoch: -1, BaseSequence: -1}
	case p.ID == 0:
		return errors.New("producer id 0: want -1 (no producer) or an id InitProducerId allocated")
	case p.Epoch < 0 || p.BaseSequence < 0:
		return fmt.Errorf("producer id %d with epoch %d and base sequence %d: an idempotent batch has both >= 0", p.ID, p.Epoch, p.BaseSequence)
	}
	defer func() { c.n++ }()
	if c.n == 0 {
		c.first = p
	} else if p.ID != c.first.ID || p.Epoch != c.first.Epoch || p.ID > 0 && p.BaseSequence != c.next {
		return fmt.Errorf("batch %d has producer %d epoch %d sequence %d: one partition's batches are one producer's, with consecutive sequences", c.n, p.ID, p.Epoch, p.BaseSequence)
	}
	if p.ID > 0 {
		c.next = int32((int64(p.BaseSequence) + b.OffsetCount()) % (1 << 31))
	}
	return nil
}

// submitter is a writer that can buffer requests before their commit is waited for
// (writer.Buffered).
type submitter interface {
	Submit(ctx context.Context, reqs []writer.Request) (func(ctx context.Context) ([]writer.Result, error), error)
}

// submitParts submits the checked partitions, one request per durability class, and
// returns the wait that fills their answers once committed (or refused). The wait must be
// called, once.
func (c *conn) submitParts(ctx context.Context, resp *kmsg.ProduceResponse, parts []producePart, size int) func() {
	fail := func(ps []producePart, err error) {
		for _, pt := range ps {
			rp := &resp.Topics[pt.t].Partitions[pt.p]
			rp.ErrorCode, rp.BaseOffset, rp.ErrorMessage = code(err), -1, msg(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, c.s.cfg.Limits.ProduceWait)
	if a, ok := c.s.cfg.Streams.(ingestAdmitter); ok {
		if err := admit(wctx, a, c.ns, size); err != nil {
			fail(parts, err)
			return cancel
		}
	}
	byClass := map[string][]producePart{}
	var classes []string
	for _, pt := range parts {
		if byClass[pt.st.Class] == nil {
			classes = append(classes, pt.st.Class)
		}
		byClass[pt.st.Class] = append(byClass[pt.st.Class], pt)
	}
	var waits []func()
	for _, class := range classes {
		ps := byClass[class]
		reqs := make([]writer.Request, len(ps))
		for i, pt := range ps {
			reqs[i] = pt.req
		}
		answer := func(res []writer.Result, err error) {
			if len(res) != len(reqs) {
				if err == nil {
					err = errors.New("the writer answered no results")
				}
				fail(ps, err)
				return
			}
			for i, pt := range ps {
				rp := &resp.Topics[pt.t].Partitions[pt.p]
				if rs := res[i]; rs.Err != nil {
					rp.ErrorCode, rp.BaseOffset, rp.ErrorMessage = code(rs.Err), -1, msg(rs.Err)
				} else {
					rp.BaseOffset = rs.BaseOffset
					if !rs.Duplicate {
						c.s.m.records.Add(float64(pt.req.Records))
					}
				}
			}
		}
		w := c.s.cfg.Writers[class]
		sw, ok := w.(submitter)
		if !ok { // a writer that cannot buffer ahead (quorum): each partition in turn, off the read loop
			waits = append(waits, c.writeInOrder(wctx, w, ps, answerPart(resp, c.s.m)))
			continue
		}
		wait, err := sw.Submit(wctx, reqs)
		if err != nil {
			fail(ps, err)
			continue
		}
		waits = append(waits, func() { answer(wait(wctx)) })
	}
	return func() {
		defer cancel()
		for _, w := range waits {
			w()
		}
	}
}

// answerPart returns the function that fills one partition's answer from its write's
// outcome (its result, or the Write's error when it answered none).
func answerPart(resp *kmsg.ProduceResponse, m *metrics) func(pt producePart, res []writer.Result, err error) {
	return func(pt producePart, res []writer.Result, err error) {
		rp := &resp.Topics[pt.t].Partitions[pt.p]
		switch {
		case len(res) == 1 && res[0].Err != nil:
			err = res[0].Err
		case len(res) == 1:
			rp.BaseOffset = res[0].BaseOffset
			if !res[0].Duplicate {
				m.records.Add(float64(pt.req.Records))
			}
			return
		case err == nil:
			err = fmt.Errorf("the writer answered %d results for one request", len(res))
		}
		rp.ErrorCode, rp.BaseOffset, rp.ErrorMessage = code(err), -1, msg(err)
	}
}

// partKey names one partition of one stream.
type partKey struct {
	stream    uint64
	partition int32
}

// writeInOrder writes each partition of ps through w (a writer without Submit) on its own
// goroutine, each only once the connection's previous write to that partition ended, so a
// connection's produces to a partition commit in the order it sent them while the read
// loop goes on; a write that waits behind a slow one (an election) waits within ctx, and
// is refused once ctx ends, unwritten. Partitions of one request, and other partitions,
// do not wait for each other. It returns the wait that has every answer filled.
func (c *conn) writeInOrder(ctx context.Context, w writer.Writer, ps []producePart, answer func(producePart, []writer.Result, error)) func() {
	var wg sync.WaitGroup
	for _, pt := range ps {
		k := partKey{pt.req.StreamID, pt.req.Partition}
		done := make(chan struct{})
		c.orderMu.Lock()
		prev := c.order[k]
		if c.order == nil {
			c.order = map[partKey]chan struct{}{}
		}
		c.order[k] = done
		c.orderMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// The next write of the partition starts only after this one and every
				// earlier one ended, even when this one gave up waiting.
				if prev != nil {
					<-prev
				}
				c.orderMu.Lock()
				if c.order[k] == done {
					delete(c.order, k)
				}
				c.orderMu.Unlock()
				close(done)
			}()
			if prev != nil {
				select {
				case <-prev:
				case <-ctx.Done():
					answer(pt, nil, fmt.Errorf("%w: the connection's previous produce to this partition was still being written: %w", writer.ErrCommitFailed, ctx.Err()))
					return
				}
			}
			res, err := w.Write(ctx, []writer.Request{pt.req})
			answer(pt, res, err)
		}()
	}
	return wg.Wait
}

// admit waits for the namespace's ingest quota to admit n bytes, until ctx ends.
func admit(ctx context.Context, a ingestAdmitter, ns string, n int) error {
	for {
		err := a.AdmitIngest(ctx, ns, n)
		var qe *meta.QuotaExceededError
		if !errors.As(err, &qe) {
			return err
		}
		wait := max(qe.RetryAfter, 10*time.Millisecond)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", writer.ErrCommitFailed, err)
		}
	}
}

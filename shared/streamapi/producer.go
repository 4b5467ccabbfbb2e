package streamapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Idempotent producers over HTTP (docs/http-api.md, "Idempotent producers").
//
// POST /v1/namespaces/{ns}/producers allocates a producer id and epoch; a produce that
// carries them with a base sequence per partition is committed at most once however often
// it is retried: a retry of a request already committed answers its original offsets.

// Error codes of idempotent producers.
const (
	// CodeOutOfOrderSequence (409): a partition's base sequence does not follow the last
	// one committed for the producer. Nothing of that partition was written.
	CodeOutOfOrderSequence = "out_of_order_sequence"
	// CodeProducerFenced (409): the producer's epoch is older than its current one (the
	// name was initialized again, or the id bumped). The holder must stop.
	CodeProducerFenced = "producer_fenced"
	// CodeUnknownProducer (409): the producer id or epoch is not known (never allocated,
	// idle for more than a day, or evicted by the namespace's cap). Initialize again.
	CodeUnknownProducer = "unknown_producer"
)

// InitProducerRequest is the body of POST /v1/namespaces/{ns}/producers: empty for a new
// anonymous producer, Name for the producer known under it (its epoch moves up, fencing
// the previous holder), or ProducerID and Epoch to bump them (Kafka's KIP-360).
type InitProducerRequest struct {
	Name       string `json:"name,omitempty"`
	ProducerID *int64 `json:"producer_id,omitempty"`
	Epoch      *int32 `json:"epoch,omitempty"`
}

// ProducerID is a producer's id and current epoch (InitProducer's answer).
type ProducerID struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// ProducerFields are the top-level fields of an idempotent produce request: the producer,
// its epoch, and per partition (its number as a string) the base sequence of the
// request's first record there. The records of a partition, in request order, take
// sequences base, base+1, ... (wrapping after 2147483647 to 0). Every record names its
// partition, so a retry lands where the first attempt did.
type ProducerFields struct {
	ProducerID *int64           `json:"producer_id,omitempty"`
	Epoch      *int32           `json:"epoch,omitempty"`
	Sequences  map[string]int32 `json:"sequences,omitempty"`
}

// InitProducer allocates or bumps a producer (POST /v1/namespaces/{ns}/producers).
func (c *Client) InitProducer(ctx context.Context, ns string, req InitProducerRequest) (ProducerID, error) {
	var out ProducerID
	if err := checkNames("init producer", ns); err != nil {
		return out, err
	}
	err := c.do(ctx, "init producer", http.MethodPost, "/v1/namespaces/"+url.PathEscape(ns)+"/producers", nil, req, &out, 0)
	return out, err
}

// ProduceIdempotent produces records as producer p, the records of partition q taking
// sequences from seqs[q] on. Every record must name its partition, and seqs must hold
// exactly the partitions the records name. Retrying the same call after an error whose
// outcome is unknown is safe: records committed before are answered with their original
// offsets, never written twice.
func (c *Client) ProduceIdempotent(ctx context.Context, ns, stream string, p ProducerID, seqs map[int32]int32, records []Record) (ProduceResponse, error) {
	var res ProduceResponse
	if err := checkNames("produce", ns, stream); err != nil {
		return res, err
	}
	if len(records) == 0 {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w: no records", ns, stream, ErrInvalidArgument)
	}
	named := map[int32]bool{}
	for i, r := range records {
		if r.Partition == nil {
			return res, fmt.Errorf("streamapi: produce %s/%s: record %d: an idempotent produce names each record's partition: %w", ns, stream, i, ErrInvalidArgument)
		}
		if _, ok := seqs[*r.Partition]; !ok {
			return res, fmt.Errorf("streamapi: produce %s/%s: record %d: no sequence for partition %d: %w", ns, stream, i, *r.Partition, ErrInvalidArgument)
		}
		named[*r.Partition] = true
	}
	if len(named) != len(seqs) {
		return res, fmt.Errorf("streamapi: produce %s/%s: sequences for %d partitions, records in %d: %w", ns, stream, len(seqs), len(named), ErrInvalidArgument)
	}
	rb, err := appendProduceBody(nil, records)
	if err != nil {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w", ns, stream, err)
	}
	body := append(appendProducerFields(make([]byte, 0, len(rb)+64+16*len(seqs)), p, seqs), rb[1:]...) // rb[0] is its '{'
	return c.produceBody(ctx, ns, stream, body, len(records))
}

// appendProducerFields opens a produce body with the producer fields, followed by a comma:
// the records follow.
func appendProducerFields(dst []byte, p ProducerID, seqs map[int32]int32) []byte {
	dst = append(dst, `{"producer_id":`...)
	dst = strconv.AppendInt(dst, p.ProducerID, 10)
	dst = append(dst, `,"epoch":`...)
	dst = strconv.AppendInt(dst, int64(p.Epoch), 10)
	dst = append(dst, `,"sequences":{`...)
	parts := make([]int32, 0, len(seqs))
	for q := range seqs {
		parts = append(parts, q)
	}
	slices.Sort(parts)
	for i, q := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, int64(q), 10)
		dst = append(dst, `":`...)
		dst = strconv.AppendInt(dst, int64(seqs[q]), 10)
	}
	return append(dst, "},"...)
}

// produceBody sends a produce body of n records and checks the answer.
func (c *Client) produceBody(ctx context.Context, ns, stream string, body []byte, n int) (ProduceResponse, error) {
	var res ProduceResponse
	err := c.do(ctx, "produce", http.MethodPost, streamPath(ns, stream)+"/records", nil, rawBody(body), &res, 0)
	if err != nil {
		return res, err
	}
	if len(res.Offsets) != n {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w: %d offsets for %d records", ns, stream, ErrBadResponse, len(res.Offsets), n)
	}
	refused := 0
	for _, o := range res.Offsets {
		if o.Error != nil {
			refused++
		}
	}
	if refused > 0 {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w (%d of %d records refused)", ns, stream, ErrPartialCommit, refused, n)
	}
	return res, nil
}

// IdempotentProducer produces to one stream as one producer, numbering each partition's
// records and retrying every request whose outcome is unknown until it is answered: the
// sequencer answers a retry of committed records with their original offsets, so nothing
// is written twice and nothing acknowledged is lost. Send calls are serialized (a
// producer's requests to a partition must commit in sequence order).
type IdempotentProducer struct {
	c          *Client
	ns, stream string
	// MaxRetryTime bounds the retries of one Send (default 2 minutes).
	MaxRetryTime time.Duration

	mu   sync.Mutex
	id   ProducerID
	next map[int32]int32
}

// NewIdempotentProducer initializes a producer of ns (named when name is not empty: a
// previous holder of the name is fenced) for stream.
func (c *Client) NewIdempotentProducer(ctx context.Context, ns, stream, name string) (*IdempotentProducer, error) {
	id, err := c.InitProducer(ctx, ns, InitProducerRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return &IdempotentProducer{c: c, ns: ns, stream: stream, id: id, next: map[int32]int32{}, MaxRetryTime: 2 * time.Minute}, nil
}

// ID is the producer's id and epoch.
func (p *IdempotentProducer) ID() ProducerID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// Send produces records (each naming its partition), retrying with the same sequences
// while the outcome is unknown or the server says a retry may succeed. It returns the
// answer of the attempt that settled it. After a definite refusal (producer_fenced,
// unknown_producer, out_of_order_sequence, bad input) the sequences do not move.
func (p *IdempotentProducer) Send(ctx context.Context, records []Record) (ProduceResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seqs := map[int32]int32{}
	counts := map[int32]int64{}
	for i, r := range records {
		if r.Partition == nil {
			return ProduceResponse{}, fmt.Errorf("streamapi: send %s/%s: record %d names no partition: %w", p.ns, p.stream, i, ErrInvalidArgument)
		}
		seqs[*r.Partition] = p.next[*r.Partition]
		counts[*r.Partition]++
	}
	deadline := time.Now().Add(p.MaxRetryTime)
	backoff := 20 * time.Millisecond
	for {
		res, err := p.c.ProduceIdempotent(ctx, p.ns, p.stream, p.id, seqs, records)
		if err == nil {
			for q, n := range counts {
				p.next[q] = nextSequence(seqs[q], n)
			}
			return res, nil
		}
		if !IsRetriable(err) || ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return res, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// nextSequence is seq + n wrapping after math.MaxInt32 to 0.
func nextSequence(seq int32, n int64) int32 {
	n %= int64(math.MaxInt32) + 1
	if int64(seq) > math.MaxInt32-n {
		return int32(n - (math.MaxInt32 - int64(seq)) - 1)
	}
	return seq + int32(n)
}

// IsProducerRefusal reports whether err is a refusal of an idempotent produce (code
// out_of_order_sequence, producer_fenced or unknown_producer).
func IsProducerRefusal(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Detail.Code {
	case CodeOutOfOrderSequence, CodeProducerFenced, CodeUnknownProducer:
		return true
	}
	return false
}

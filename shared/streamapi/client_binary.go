package streamapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/recordbatch"
)

// PartitionCacheTTL is how long the client keeps a stream's partition count, learnt for
// keyed records without a partition (binary produce). A stream that grew meanwhile gets
// keyed records placed by the old count until then, as a Kafka client between metadata
// refreshes.
const PartitionCacheTTL = 10 * time.Second

// maxCachedStreams bounds the partition cache: past it the cache starts over.
const maxCachedStreams = 1024

// partitionCache holds partition counts by namespace/stream, at most maxCachedStreams.
type partitionCache struct {
	mu sync.Mutex
	m  map[string]cachedCount
}

type cachedCount struct {
	n  int32
	at time.Time
}

// partitions returns the partition count of ns/stream, from the cache when fresh.
func (c *Client) partitions(ctx context.Context, ns, stream string) (int32, error) {
	k := ns + "/" + stream
	now := c.now()
	c.parts.mu.Lock()
	e, ok := c.parts.m[k]
	c.parts.mu.Unlock()
	if ok && now.Sub(e.at) < PartitionCacheTTL {
		return e.n, nil
	}
	st, err := c.GetStream(ctx, ns, stream)
	if err != nil {
		return 0, err
	}
	if st.Partitions < 1 {
		return 0, fmt.Errorf("streamapi: produce %s/%s: %w: stream has %d partitions", ns, stream, ErrBadResponse, st.Partitions)
	}
	c.parts.mu.Lock()
	if c.parts.m == nil || len(c.parts.m) >= maxCachedStreams {
		c.parts.m = make(map[string]cachedCount)
	}
	c.parts.m[k] = cachedCount{n: st.Partitions, at: now}
	c.parts.mu.Unlock()
	return st.Partitions, nil
}

func (c *Client) forgetPartitions(ns, stream string) {
	c.parts.mu.Lock()
	delete(c.parts.m, ns+"/"+stream)
	c.parts.mu.Unlock()
}

// serverPicks is the group of keyless records without a partition: the server picks one.
const serverPicks = -1

// produceGroup is the records of one binary request.
type produceGroup struct {
	partition int32 // or serverPicks
	index     []int // positions in the caller's records
}

// produceBinary sends records as RecordBatch v2 bytes, one request per target partition.
func (c *Client) produceBinary(ctx context.Context, ns, stream string, records []Record) (ProduceResponse, error) {
	var res ProduceResponse
	fail := func(err error) (ProduceResponse, error) {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w", ns, stream, err)
	}
	var (
		groups []produceGroup
		at     = map[int32]int{}
		n      int32 // partition count, learnt when a keyed record needs it
		nowMs  = c.now().UnixMilli()
		rs     = make([]recordbatch.Record, len(records))
	)
	for i, r := range records {
		if r.Offset != nil {
			return fail(fmt.Errorf("record %d: an offset is assigned by the log and cannot be produced: %w", i, ErrInvalidRecord))
		}
		br, err := batchRecord(r, nowMs)
		if err != nil {
			return fail(fmt.Errorf("record %d: %w", i, err))
		}
		rs[i] = br
		p := int32(serverPicks)
		switch {
		case r.Partition != nil:
			p = *r.Partition
			if p < 0 {
				return fail(fmt.Errorf("record %d: partition %d: %w", i, p, ErrInvalidArgument))
			}
		case r.Key != nil || r.KeyBase64 != nil:
			if n == 0 {
				var err error
				if n, err = c.partitions(ctx, ns, stream); err != nil {
					return res, err
				}
			}
			k, _ := r.KeyBytes()
			p = KeyPartition(k, n)
		}
		g, ok := at[p]
		if !ok {
			g = len(groups)
			at[p] = g
			groups = append(groups, produceGroup{partition: p})
		}
		groups[g].index = append(groups[g].index, i)
	}
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = c.codec
	bodies := make([][]byte, len(groups))
	for gi, g := range groups {
		sub := rs // one group holds every record, in order
		if len(groups) > 1 {
			sub = make([]recordbatch.Record, len(g.index))
			for j, i := range g.index {
				sub[j] = rs[i]
			}
		}
		var err error
		if bodies[gi], err = recordbatch.Append(nil, sub, opt); err != nil {
			return fail(fmt.Errorf("build the batch of partition %d: %w", g.partition, err))
		}
	}
	// One request per partition, at most maxProduceRequests at once, so the requests of
	// one call share the node's flush instead of waiting for one flush each.
	answers := make([]ProduceResponse, len(groups))
	errs := make([]error, len(groups))
	send := func(gi int) {
		q := url.Values{}
		if p := groups[gi].partition; p != serverPicks {
			q.Set("partition", strconv.FormatInt(int64(p), 10))
		}
		pr := &answers[gi]
		err := c.do(ctx, "produce", http.MethodPost, streamPath(ns, stream)+"/records", q, batchBody(bodies[gi]), pr, 0)
		if err == nil && (len(pr.Offsets) != 1 || pr.Offsets[0].Error != nil) {
			err = fmt.Errorf("streamapi: produce %s/%s: %w: %d offsets for one batch", ns, stream, ErrBadResponse, len(pr.Offsets))
		}
		errs[gi] = err
	}
	if len(groups) == 1 {
		send(0)
	} else {
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxProduceRequests)
		for gi := range groups {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				send(gi)
			}()
		}
		wg.Wait()
	}
	res.Offsets = make([]RecordOffset, len(records))
	var (
		failed    []error
		committed int
		token     uint64
	)
	for gi, g := range groups {
		if err := errs[gi]; err != nil {
			if ErrorCode(err) == CodePartitionNotFound {
				c.forgetPartitions(ns, stream)
			}
			failed = append(failed, err)
			d := errorDetailOf(err)
			for _, i := range g.index {
				res.Offsets[i] = RecordOffset{Partition: g.partition, Offset: -1, Error: d}
			}
			continue
		}
		base := answers[gi].Offsets[0]
		for j, i := range g.index {
			res.Offsets[i] = RecordOffset{Partition: base.Partition, Offset: base.Offset + int64(j)}
		}
		committed += len(g.index)
		if t := tokenIndex(answers[gi].Token); t >= token {
			token, res.Token = t, answers[gi].Token
		}
	}
	switch {
	case len(failed) == 0:
		return res, nil
	case committed == 0:
		// Nothing committed: the error of the request whose outcome says least (one that
		// may have written), so a caller never takes the call for cleanly refused when
		// part of it may be in the log.
		return ProduceResponse{}, mayHaveWritten(failed)
	}
	// Not wrapped: a retriable answer of one request must not make the caller resend the
	// records that did commit.
	return res, fmt.Errorf("streamapi: produce %s/%s: %w (%d of %d records refused; first: %v)", ns, stream, ErrPartialCommit, len(records)-committed, len(records), failed[0])
}

// maxProduceRequests bounds the requests one Produce call has in flight.
const maxProduceRequests = 16

// mayHaveWritten picks, of the errors of requests that all failed, the first that may
// have written (no answer, or commit_unknown), else the first.
func mayHaveWritten(errs []error) error {
	for _, err := range errs {
		var ae *APIError
		if !errors.As(err, &ae) || ae.Detail.Code == CodeCommitUnknown {
			return err
		}
	}
	return errs[0]
}

// errorDetailOf is the ErrorDetail of a failed request: the server's, or commit_unknown
// for a request that got no answer (it may have been written).
func errorDetailOf(err error) *ErrorDetail {
	var ae *APIError
	if errors.As(err, &ae) {
		d := ae.Detail
		return &d
	}
	return &ErrorDetail{Code: CodeCommitUnknown, Message: err.Error(), Retriable: true}
}

// tokenIndex reads the commit index of a "v1.N" consistency token (0 when it is not one).
func tokenIndex(tok string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(tok, "v1."), 10, 64)
	return n
}

// fetchBinary fetches with Accept: MediaRecordBatch and decodes the batches.
func (c *Client) fetchBinary(ctx context.Context, path string, q url.Values, offset int64, extra time.Duration) (FetchResponse, error) {
	var res FetchResponse
	var ans binaryAnswer
	if err := c.do(ctx, "fetch", http.MethodGet, path, q, nil, &ans, extra); err != nil {
		return res, err
	}
	for _, h := range []struct {
		name string
		v    *int64
	}{{HeaderNextOffset, &res.NextOffset}, {HeaderHighWatermark, &res.HighWatermark}, {HeaderLogStart, &res.LogStart}} {
		v, err := strconv.ParseInt(ans.header.Get(h.name), 10, 64)
		if err != nil {
			return res, fmt.Errorf("streamapi: fetch %s: %w: header %s %q is not an integer", path, ErrBadResponse, h.name, ans.header.Get(h.name))
		}
		*h.v = v
	}
	recs, err := DecodeBatches(ans.body, offset)
	if err != nil {
		return res, fmt.Errorf("streamapi: fetch %s: %w: %w", path, ErrBadResponse, err)
	}
	res.Records = recs
	return res, nil
}

// KeyPartition is Kafka's default partitioner: murmur2 of the key, made positive, modulo
// the partition count, as the log node and Kafka clients place keyed records.
func KeyPartition(key []byte, partitions int32) int32 {
	return int32((murmur2(key) & 0x7fffffff) % uint32(partitions))
}

// murmur2 is the 32-bit MurmurHash2 as Kafka's Utils.murmur2 computes it.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	for ; len(data) >= 4; data = data[4:] {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

const consumeUsage = `usage: loam consume STREAM [flags]

Prints the records of one partition (--partition) or of every partition, one line each:
the value's text (--format value; a tombstone prints null, a key and headers are not shown)
or the whole record as JSON with offset, partition, timestamp, key, value or value_base64
and headers (--format json). Values that hold newlines or binary bytes are only
unambiguous in the json format.

--offset says where each partition starts: earliest (the log start, the default), latest
(the high watermark: only records produced from now on) or an offset within
[log start, high watermark].

Without --follow the command stops at each partition's high watermark as it was when the
command started; partitions are read one after another, in order. With --follow it reads
every partition at once and keeps long-polling (--wait) for new records until interrupted
(exit status 0) or --max records were printed; output of different partitions interleaves.
`

func runConsume(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("consume", g)
	var partition optInt64
	fs.Var(&partition, "partition", "read only partition `P` (default: all)")
	offset := fs.String("offset", "earliest", "where to start in each partition: earliest, latest or an offset")
	follow := fs.Bool("follow", false, "keep waiting for new records instead of stopping at the high watermark")
	fs.BoolVar(follow, "f", false, "short for --follow")
	maxRecords := fs.Int64("max", 0, "stop after this many records (0: no limit)")
	format := fs.String("format", "value", "value (the value per line) or json (the record as JSON per line)")
	maxBytes := fs.Int("max-bytes", 1<<20, "max_bytes of each fetch")
	wait := fs.Duration("wait", 10*time.Second, "with --follow, how long one fetch waits for new records (max_wait_ms)")
	named := fs.String("consumer", "", "read as a member of named consumer `NAME`: from its committed offsets, committing as it goes (consumer.go)")
	member := fs.String("member", "", "with --consumer, this member's name (default: host-pid-random)")
	session := fs.Duration("session", 10*time.Second, "with --consumer, the member's session: its leases end this long after its last heartbeat")
	pos, err := parseArgs(fs, consumeUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "STREAM"); err != nil {
		return err
	}
	start, err := parseStart(*offset)
	if err != nil {
		return err
	}
	switch {
	case *format != "value" && *format != "json":
		return usagef("consume: --format %q: want value or json", *format)
	case partition.set && (partition.v < 0 || partition.v > 1<<31-1):
		return usagef("consume: --partition %d: want a partition number", partition.v)
	case *maxRecords < 0:
		return usagef("consume: --max %d: want 0 (no limit) or more", *maxRecords)
	case *maxBytes < 1 || *maxBytes > 1<<30:
		return usagef("consume: --max-bytes %d: want a positive number", *maxBytes)
	case *wait < 0 || *wait > 5*time.Minute:
		return usagef("consume: --wait %v: want 0 to 5m", *wait)
	}
	if *named != "" && (partition.set || *offset != "earliest") {
		return usagef("consume: --consumer reads the partitions leased to it from its committed offsets: drop --partition and --offset")
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	k := &consumer{c: c, ns: g.namespace, stream: pos[0], json: *format == "json", max: *maxRecords,
		maxBytes: int32(*maxBytes), wait: *wait, out: bufio.NewWriterSize(stdout, 64<<10), stderr: stderr}
	if *named != "" {
		n := &namedConsume{k: k, name: *named, member: *member, session: *session, follow: *follow}
		if err := n.run(ctx); err != nil {
			return fmt.Errorf("consume %s as %s: %w", pos[0], *named, err)
		}
		return nil
	}
	p := int32(-1) // all
	if partition.set {
		p = int32(partition.v)
	}
	if err := k.run(ctx, p, start, *follow); err != nil {
		return fmt.Errorf("consume %s: %w", pos[0], err)
	}
	return nil
}

// startOffset is where consume starts in each partition: an offset, or earliest/latest.
type startOffset struct {
	kind   string // "earliest", "latest" or "offset"
	offset int64
}

func parseStart(s string) (startOffset, error) {
	switch s {
	case "earliest", "beginning", "oldest":
		return startOffset{kind: "earliest"}, nil
	case "latest", "end", "newest":
		return startOffset{kind: "latest"}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return startOffset{}, usagef("consume: --offset %q: want earliest, latest or an offset >= 0", s)
	}
	return startOffset{kind: "offset", offset: n}, nil
}

// Fetch retry policy for retriable errors: without --follow a few attempts, with --follow
// until interrupted.
const (
	fetchRetries    = 5
	fetchBackoff    = 100 * time.Millisecond
	fetchBackoffMax = 5 * time.Second
	maxStalls       = 50 // fetches in a row below the high watermark that return nothing
)

type consumer struct {
	c          *streamapi.Client
	ns, stream string
	json       bool
	max        int64
	maxBytes   int32
	wait       time.Duration
	stderr     io.Writer

	mu    sync.Mutex // guards out and count
	out   *bufio.Writer
	count int64
	buf   []byte
}

// cursor is one partition's read position: next to read, end to stop at (-1: never).
type cursor struct {
	p         int32
	next, end int64
}

func (k *consumer) run(ctx context.Context, partition int32, start startOffset, follow bool) error {
	// A server that cannot be reached at all fails the command at once; answers that say
	// retry are retried.
	var st streamapi.Stream
	err := retry(ctx, k.stderr, "consume", fetchRetries, isRetriableAnswer, func() (err error) {
		st, err = k.c.GetStream(ctx, k.ns, k.stream)
		return err
	})
	if err != nil {
		return err
	}
	if partition >= st.Partitions {
		return fmt.Errorf("partition %d does not exist: the stream has partitions 0..%d", partition, st.Partitions-1)
	}
	var parts []int32
	if partition >= 0 {
		parts = []int32{partition}
	} else {
		for p := range st.Partitions {
			parts = append(parts, p)
		}
	}
	cursors := make([]cursor, len(parts))
	for i, p := range parts {
		logStart, hw, err := k.bounds(ctx, st, p)
		if err != nil {
			return err
		}
		cur := cursor{p: p, next: logStart, end: hw}
		switch start.kind {
		case "latest":
			cur.next = hw
		case "offset":
			if start.offset < logStart || start.offset > hw {
				return fmt.Errorf("partition %d: offset %d is outside [%d, %d] (log start, high watermark): use --offset earliest, latest or an offset in range",
					p, start.offset, logStart, hw)
			}
			cur.next = start.offset
		}
		if follow {
			cur.end = -1
		}
		cursors[i] = cur
	}
	if !follow {
		for _, cur := range cursors {
			if done, err := k.drain(ctx, cur); done || err != nil {
				return err
			}
		}
		return nil
	}
	return k.followAll(ctx, cursors)
}

// bounds returns a partition's log start and high watermark: from the stream description,
// or, when the server did not describe partitions, from a fetch.
func (k *consumer) bounds(ctx context.Context, st streamapi.Stream, p int32) (logStart, hw int64, err error) {
	for _, pi := range st.PartitionInfo {
		if pi.Partition == p {
			return pi.LogStart, pi.HighWatermark, nil
		}
	}
	res, err := k.c.Fetch(ctx, k.ns, k.stream, p, 0, 1, 0)
	if err == nil {
		return res.LogStart, res.HighWatermark, nil
	}
	var ae *streamapi.APIError
	if errors.As(err, &ae) && ae.Detail.Code == streamapi.CodeOffsetOutOfRange && ae.Detail.LogStart != nil && ae.Detail.HighWater != nil {
		return *ae.Detail.LogStart, *ae.Detail.HighWater, nil
	}
	return 0, 0, fmt.Errorf("partition %d: %w", p, err)
}

// drain prints one partition's records from cur.next up to cur.end. done reports that
// --max was reached.
func (k *consumer) drain(ctx context.Context, cur cursor) (done bool, err error) {
	stalls := 0
	for cur.next < cur.end {
		res, err := k.fetch(ctx, cur.p, cur.next, 0, fetchRetries)
		if err != nil {
			return false, err
		}
		if done, err := k.emit(res.Records, cur.end); done || err != nil {
			return done, err
		}
		if res.NextOffset > cur.next {
			cur.next, stalls = res.NextOffset, 0
			continue
		}
		if res.HighWatermark <= cur.next {
			return false, nil // the stream was recreated below where we stopped
		}
		if stalls++; stalls > maxStalls {
			return false, fmt.Errorf("partition %d: no progress at offset %d below the high watermark %d", cur.p, cur.next, res.HighWatermark)
		}
		if err := sleep(ctx, fetchBackoff); err != nil {
			return false, err
		}
	}
	return false, nil
}

// followAll long-polls every cursor at once until ctx ends (success) or --max is reached.
func (k *consumer) followAll(ctx context.Context, cursors []cursor) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, cur := range cursors {
		wg.Go(func() {
			if err := k.follow(ctx, cur); err != nil {
				errOnce.Do(func() { firstErr = err })
			}
			cancel()
		})
	}
	wg.Wait()
	return firstErr
}

// follow long-polls one partition. It returns nil when ctx ends or --max is reached (and
// then cancels nothing itself: followAll does).
func (k *consumer) follow(ctx context.Context, cur cursor) error {
	for {
		began := time.Now()
		res, err := k.fetch(ctx, cur.p, cur.next, k.wait, -1)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		done, err := k.emit(res.Records, -1)
		if done || err != nil {
			return err
		}
		if res.NextOffset > cur.next {
			cur.next = res.NextOffset
			continue
		}
		// Nothing new. When the answer came at once (--wait 0, or a server that does not
		// long-poll), pause rather than spin.
		if time.Since(began) < 100*time.Millisecond {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return nil
			}
		}
	}
}

// fetch fetches with retries of retriable errors (retries < 0: until ctx ends).
func (k *consumer) fetch(ctx context.Context, p int32, offset int64, wait time.Duration, retries int) (streamapi.FetchResponse, error) {
	var res streamapi.FetchResponse
	err := retry(ctx, k.stderr, fmt.Sprintf("consume: partition %d", p), retries, streamapi.IsRetriable, func() (err error) {
		res, err = k.c.Fetch(ctx, k.ns, k.stream, p, offset, k.maxBytes, wait)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("partition %d at offset %d: %w", p, offset, err)
	}
	return res, nil
}

// isRetriableAnswer reports whether err is an answer of the server that says retry.
func isRetriableAnswer(err error) bool {
	var ae *streamapi.APIError
	return errors.As(err, &ae) && ae.Retriable()
}

// retry calls fn until it succeeds, fails with an error that retriable rejects, or has
// been retried retries times (retries < 0: until ctx ends), backing off exponentially and
// saying so on stderr. Only for reads: a retried write may be written twice.
func retry(ctx context.Context, stderr io.Writer, what string, retries int, retriable func(error) bool, fn func() error) error {
	backoff := fetchBackoff
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !retriable(err) || (retries >= 0 && attempt >= retries) {
			return err
		}
		fmt.Fprintf(stderr, "loam: %s: %s; retrying in %v\n", what, shortErr(err), backoff)
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, fetchBackoffMax)
	}
}

// emit prints the records below end (end < 0: all) and flushes. done reports that --max
// was reached.
func (k *consumer) emit(recs []streamapi.Record, end int64) (done bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.max > 0 && k.count >= k.max {
		return true, nil
	}
	for _, r := range recs {
		if end >= 0 && r.Offset != nil && *r.Offset >= end {
			break
		}
		k.buf = k.buf[:0]
		if k.json {
			if k.buf, err = streamapi.AppendRecordJSON(k.buf, r); err != nil {
				return false, err
			}
		} else {
			v, err := r.Bytes()
			if err != nil {
				return false, err
			}
			if r.IsTombstone() {
				v = []byte("null")
			}
			k.buf = append(k.buf, v...)
		}
		k.buf = append(k.buf, '\n')
		if _, err := k.out.Write(k.buf); err != nil {
			return false, err
		}
		k.count++
		if k.max > 0 && k.count >= k.max {
			return true, k.out.Flush()
		}
	}
	return false, k.out.Flush()
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

const produceUsage = `usage: loam produce STREAM [flags]

Writes records to STREAM and prints where each landed ("partition=P offset=O").

Without --value, every line of stdin is one record's value (the newline, or CR LF, is not
part of it; empty lines are skipped). A value that is valid JSON is sent as JSON ("value"),
anything else as its raw bytes ("value_base64"), so a line reads back exactly as written.
The line "null" is a tombstone (a null value). Lines are sent in batches of up to
--batch-records records or --batch-bytes bytes, one request at a time, in line order; stdin
is read ahead while a request is in flight, and a batch goes as soon as no further line is
waiting, so interactive input is sent line by line.

With --value V, one record with value V is sent and stdin is not read.

--key, --partition and --header apply to every record; headers keep their order, and a name
given twice is sent twice. Without --partition, records with a key go to murmur2(key) mod
partitions (Kafka's default partitioner); keyless records of one batch go together to one
partition, round-robin across batches.

A batch the server refused as retriable without writing it (503 unavailable, 429, ...), or
that could not be sent because the connection was refused, is retried up to 3 times; a batch
whose outcome is unknown (commit_unknown, a broken connection) is not retried, since it may
have been written: the command stops and says so.
`

// optString is a string flag that knows whether it was set.
type optString struct {
	v   string
	set bool
}

func (o *optString) String() string {
	if o == nil {
		return ""
	}
	return o.v
}

func (o *optString) Set(s string) error { o.v, o.set = s, true; return nil }

// headerFlags collects repeated --header k=v in order; a name may repeat.
type headerFlags struct{ hs streamapi.Headers }

func (h *headerFlags) String() string {
	if h == nil {
		return ""
	}
	parts := make([]string, len(h.hs))
	for i, x := range h.hs {
		parts[i] = x.Key + "=" + string(x.Value)
	}
	return strings.Join(parts, ",")
}

func (h *headerFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want NAME=VALUE", s)
	}
	h.hs = append(h.hs, streamapi.StringHeader(k, v))
	return nil
}

// Produce retry policy for answers that say nothing was written.
const (
	produceRetries = 3
	produceBackoff = 200 * time.Millisecond
)

func runProduce(ctx context.Context, g *globals, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("produce", g)
	var value, key optString
	fs.Var(&value, "value", "send one record with value `V` instead of reading stdin")
	fs.Var(&key, "key", "the key `K` of every record")
	keySep := fs.String("key-separator", "", "split each line at the first `SEP` into key and value (a line without SEP has no key)")
	var partition optInt64
	fs.Var(&partition, "partition", "send every record to partition `P` (default: chosen by the server)")
	headers := &headerFlags{}
	fs.Var(headers, "header", "a header `NAME=VALUE` for every record (repeatable; order and repeated names are kept)")
	batchRecords := fs.Int("batch-records", 10000, "at most this many records per request")
	batchBytes := fs.Int("batch-bytes", 1<<20, "at most this many value bytes per request (a longer line goes alone)")
	quiet := fs.Bool("quiet", false, "print nothing on success")
	fs.BoolVar(quiet, "q", false, "short for --quiet")
	pos, err := parseArgs(fs, produceUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "STREAM"); err != nil {
		return err
	}
	switch {
	case *keySep != "" && key.set:
		return usagef("produce: --key and --key-separator exclude each other")
	case *keySep != "" && value.set:
		return usagef("produce: --key-separator splits stdin lines; it does not apply to --value")
	case partition.set && (partition.v < 0 || partition.v > 1<<31-1):
		return usagef("produce: --partition %d: want a partition number", partition.v)
	case *batchRecords < 1 || *batchBytes < 1:
		return usagef("produce: --batch-records and --batch-bytes must be positive")
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	p := &producer{c: c, ns: g.namespace, stream: pos[0], stdout: stdout, stderr: stderr, quiet: *quiet,
		headers: headers.hs, keySep: []byte(*keySep)}
	if key.set {
		p.key = []byte(key.v)
	}
	if partition.set {
		v := int32(partition.v)
		p.partition = &v
	}
	if value.set {
		err = p.send(ctx, []streamapi.Record{p.record([]byte(value.v))})
	} else {
		err = p.readLines(ctx, stdin, *batchRecords, *batchBytes)
	}
	if err != nil {
		return fmt.Errorf("produce %s: %w", pos[0], err)
	}
	return nil
}

type producer struct {
	c              *streamapi.Client
	ns, stream     string
	stdout, stderr io.Writer
	quiet          bool
	key            []byte // nil: none (unless keySep splits one off)
	keySep         []byte
	partition      *int32
	headers        streamapi.Headers
	acked          int
}

// record builds the record of one value (or line).
func (p *producer) record(line []byte) streamapi.Record {
	key := p.key
	if len(p.keySep) > 0 {
		if k, v, ok := bytes.Cut(line, p.keySep); ok {
			key, line = k, v
		}
	}
	var r streamapi.Record
	if !bytes.Equal(line, []byte("null")) {
		r = streamapi.AutoValue(line)
	}
	r.SetKey(key)
	r.Partition = p.partition
	if len(p.headers) > 0 {
		r.Headers = p.headers
	}
	return r
}

// readLines sends stdin's lines in batches. A goroutine reads stdin ahead (up to one full
// batch) while a request is in flight. A batch is sent when it is full, or as soon as no
// further line is waiting: a file or a fast pipe goes in full batches, lines typed by hand
// or written slowly go out one by one as they arrive. Batches are sent one at a time, so
// records keep their line order.
func (p *producer) readLines(ctx context.Context, stdin io.Reader, maxRecords, maxBytes int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the reader when a send fails (it may still be blocked reading)
	lines := make(chan []byte, maxRecords)
	var readErr error // written before lines is closed
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(stdin, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			line = bytes.TrimSuffix(line, []byte("\n"))
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(line) > 0 {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
		}
	}()
	var pending []byte // a line that did not fit the previous batch
	for {
		line := pending
		pending = nil
		if line == nil {
			select {
			case l, ok := <-lines:
				if !ok {
					if readErr != nil {
						return fmt.Errorf("read stdin after %d records: %w", p.acked, readErr)
					}
					return nil
				}
				line = l
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		batch := []streamapi.Record{p.record(line)}
		size := len(line)
	fill:
		for len(batch) < maxRecords && size < maxBytes {
			select {
			case l, ok := <-lines:
				if !ok {
					break fill // the next receive reports the end
				}
				if size+len(l) > maxBytes {
					pending = l
					break fill
				}
				batch = append(batch, p.record(l))
				size += len(l)
			default:
				break fill // nothing waiting: send now
			}
		}
		if err := p.send(ctx, batch); err != nil {
			return err
		}
	}
}

// send produces one batch, retrying answers that say nothing was written, and prints the
// offsets.
func (p *producer) send(ctx context.Context, recs []streamapi.Record) error {
	for attempt := 0; ; attempt++ {
		res, err := p.c.Produce(ctx, p.ns, p.stream, recs)
		if err == nil {
			p.acked += len(recs)
			if !p.quiet {
				w := bufio.NewWriter(p.stdout)
				for _, o := range res.Offsets {
					fmt.Fprintf(w, "partition=%d offset=%d\n", o.Partition, o.Offset)
				}
				return w.Flush()
			}
			return nil
		}
		if attempt < produceRetries && nothingWritten(err) {
			fmt.Fprintf(p.stderr, "loam: produce: %s; retrying\n", shortErr(err))
			if err := sleep(ctx, produceBackoff<<attempt); err != nil {
				return err
			}
			continue
		}
		var ae *streamapi.APIError
		if errors.As(err, &ae) && ae.Status < 500 || nothingWritten(err) {
			return fmt.Errorf("%d records acknowledged, the next %d were not written: %w", p.acked, len(recs), err)
		}
		return fmt.Errorf("%d records acknowledged; the next %d may or may not have been written: %w", p.acked, len(recs), err)
	}
}

// nothingWritten reports whether err is retriable and says the write did not happen: a
// retriable answer other than commit_unknown, or a connection that could not be opened.
// Other network errors and commit_unknown may have written it.
func nothingWritten(err error) bool {
	var ae *streamapi.APIError
	if errors.As(err, &ae) {
		return ae.Retriable() && ae.Detail.Code != streamapi.CodeCommitUnknown
	}
	return notSent(err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

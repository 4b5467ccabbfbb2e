package cluster

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// Entry is one record of the final log as a node served it.
type Entry struct {
	Offset    int64
	Key       AttemptKey
	RecordKey string
	Value     []byte
}

// Log is one node's view of a stream: each partition's records from offset 0, in the order
// fetched.
type Log map[int32][]Entry

// Report sums up a check.
type Report struct {
	Records         int // in the final log
	Acked           int // acknowledged attempts (all present where acknowledged)
	Failed          int // attempts refused outright (all absent)
	Unknown         int // attempts with an unknown outcome
	UnknownPresent  int // … of which present (once)
	RetriedPresent  int // record ids present more than once, through retried attempts
	Observed        int // offsets read by tailers during the load (all agree with the log)
	StaleReads      int // fetches a lagging node answered offset_out_of_range
	Violations      []string
	RequestFailures map[string]int
}

func (r *Report) String() string {
	return fmt.Sprintf("%d records: %d acknowledged attempts (all present once at their offset), %d refused (all absent), %d unknown (%d present once), %d ids present twice through retries, %d offsets read during the load (all agree), %d stale reads, %d violations",
		r.Records, r.Acked, r.Failed, r.Unknown, r.UnknownPresent, r.RetriedPresent, r.Observed, r.StaleReads, len(r.Violations))
}

// Verify checks a final log against the ledger, Jepsen-style:
//   - offsets are dense from 0 and in order in every partition;
//   - every record was sent, with the exact key, value and partition of its attempt;
//   - an acknowledged attempt is present exactly once, at its acknowledged offset;
//   - a refused attempt (Failed) is absent; an unknown one is present at most once;
//   - whatever the tailers read during the load is what the log holds at that offset;
//   - the violations the ledger recorded while the load ran (two acks at one offset,
//     out-of-order fetches) are reported.
func Verify(log Log, l *Ledger) *Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	rep := &Report{StaleReads: l.staleReads}
	bad := func(format string, a ...any) {
		if len(rep.Violations) < 50 {
			rep.Violations = append(rep.Violations, fmt.Sprintf(format, a...))
		}
	}
	rep.Violations = append(rep.Violations, l.violations...)
	present := map[AttemptKey]int{}
	idPresent := map[int64]int{}
	for _, p := range slices.Sorted(maps.Keys(log)) {
		for i, e := range log[p] {
			if e.Offset != int64(i) {
				bad("partition %d: position %d holds offset %d: offsets must be dense from 0 and in order", p, i, e.Offset)
				break
			}
			rep.Records++
			a, ok := l.attempts[e.Key]
			if !ok {
				bad("partition %d offset %d: attempt %s was never sent", p, e.Offset, e.Key)
				continue
			}
			if a.partition != p || a.key != e.RecordKey || !bytes.Equal(a.value, e.Value) {
				bad("partition %d offset %d: attempt %s differs from what was sent (partition %d)", p, e.Offset, e.Key, a.partition)
			}
			switch a.outcome {
			case Failed:
				bad("partition %d offset %d: attempt %s is present although its request was refused (%s)", p, e.Offset, e.Key, a.err)
			case Acked:
				if a.offset != e.Offset {
					bad("partition %d offset %d: attempt %s is here but was acknowledged at offset %d", p, e.Offset, e.Key, a.offset)
				}
			}
			present[e.Key]++
			idPresent[e.Key.ID]++
			if present[e.Key] > 1 {
				bad("partition %d offset %d: attempt %s present %d times", p, e.Offset, e.Key, present[e.Key])
			}
		}
	}
	for k, a := range l.attempts {
		switch a.outcome {
		case Acked:
			rep.Acked++
			if present[k] == 0 {
				bad("acknowledged attempt %s (partition %d offset %d) is missing", k, a.partition, a.offset)
			}
		case Failed:
			rep.Failed++
		case Unknown, Pending:
			rep.Unknown++
			if present[k] > 0 {
				rep.UnknownPresent++
			}
		}
	}
	for _, n := range idPresent {
		if n > 1 {
			rep.RetriedPresent++
		}
	}
	for p, m := range l.observed {
		entries := log[p]
		for off, k := range m {
			rep.Observed++
			if off >= int64(len(entries)) {
				bad("partition %d offset %d: read as %s during the load, but the log ends at %d", p, off, k, len(entries))
			} else if entries[off].Key != k {
				bad("partition %d offset %d: read as %s during the load, the log holds %s", p, off, k, entries[off].Key)
			}
		}
	}
	return rep
}

// Target is the offset every node's copy of partition p must reach: one past the highest
// offset acknowledged or read during the load.
func (l *Ledger) Target(p int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var t int64
	for off := range l.acked[p] {
		t = max(t, off+1)
	}
	for off := range l.observed[p] {
		t = max(t, off+1)
	}
	return t
}

// ReadLog fetches every partition of a stream from one node, from offset 0 to the node's
// high watermark and at least to target(p), waiting (until ctx ends) for a node whose
// view lags. It checks each answer is dense and in order.
func ReadLog(ctx context.Context, c *streamapi.Client, ns, stream string, partitions int32, target func(int32) int64) (Log, error) {
	log := Log{}
	for p := range partitions {
		var next int64
		var entries []Entry
		want := target(p)
		for {
			resp, err := c.Fetch(ctx, ns, stream, p, next, 4<<20, 0)
			if err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("read %s partition %d at %d (want up to %d): %w", c.BaseURL(), p, next, want, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if resp.LogStart != 0 {
				return nil, fmt.Errorf("read %s partition %d: log start %d, want 0", c.BaseURL(), p, resp.LogStart)
			}
			for i, r := range resp.Records {
				if r.Offset == nil || *r.Offset != next {
					return nil, fmt.Errorf("read %s partition %d from %d: record %d has offset %v: not dense and in order", c.BaseURL(), p, next-int64(i), i, r.Offset)
				}
				k, err := attemptOf(r)
				if err != nil {
					return nil, fmt.Errorf("read %s partition %d offset %d: %w", c.BaseURL(), p, next, err)
				}
				v, err := r.Bytes()
				if err != nil {
					return nil, fmt.Errorf("read %s partition %d offset %d: %w", c.BaseURL(), p, next, err)
				}
				rk := ""
				if r.Key != nil {
					rk = *r.Key
				}
				entries = append(entries, Entry{Offset: next, Key: k, RecordKey: rk, Value: v})
				next++
			}
			if len(resp.Records) > 0 && resp.NextOffset != next {
				return nil, fmt.Errorf("read %s partition %d: next_offset %d after records up to %d", c.BaseURL(), p, resp.NextOffset, next-1)
			}
			if next >= resp.HighWatermark && next >= want {
				break
			}
			if len(resp.Records) == 0 {
				// The node's view is behind what was acknowledged or read elsewhere.
				if ctx.Err() != nil {
					return nil, fmt.Errorf("read %s partition %d: stuck at %d (high watermark %d), want %d: %w", c.BaseURL(), p, next, resp.HighWatermark, want, ctx.Err())
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		log[p] = entries
	}
	return log, nil
}

// SameLog reports the first difference between two nodes' logs, or "".
func SameLog(a, b Log) string {
	for _, p := range slices.Sorted(maps.Keys(a)) {
		x, y := a[p], b[p]
		for i := range min(len(x), len(y)) {
			if x[i].Key != y[i].Key {
				return fmt.Sprintf("partition %d offset %d: %s vs %s", p, i, x[i].Key, y[i].Key)
			}
		}
		if len(x) != len(y) {
			return fmt.Sprintf("partition %d: %d records vs %d", p, len(x), len(y))
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d partitions vs %d", len(a), len(b))
	}
	return ""
}

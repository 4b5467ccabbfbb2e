package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// Named consumers: loam consumer list, loam consumer describe NAME, and
// loam consume STREAM --consumer NAME (runNamedConsume).

const consumerListUsage = `usage: loam consumer list [--json]

Lists the namespace's named consumers.
`

const consumerDescribeUsage = `usage: loam consumer describe NAME [--json]

Shows a named consumer's committed offset, lag (high watermark - committed), lease holder
and epoch on each partition it committed on or holds, and its live members.
`

func runConsumerList(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("consumer list", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, consumerListUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	names, err := c.ListConsumers(ctx, g.namespace)
	if err != nil {
		return fmt.Errorf("consumer list: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, streamapi.ConsumerList{Consumers: names})
	}
	for _, n := range names {
		fmt.Fprintln(stdout, n)
	}
	return nil
}

func runConsumerDescribe(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("consumer describe", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, consumerDescribeUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	d, err := c.DescribeConsumer(ctx, g.namespace, pos[0])
	if err != nil {
		return fmt.Errorf("consumer describe %s: %w", pos[0], err)
	}
	if *asJSON {
		return printJSON(stdout, d)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tPARTITION\tCOMMITTED\tHIGH WATERMARK\tLAG\tHOLDER\tEPOCH\tMETADATA")
	for _, p := range d.Partitions {
		committed, holder, epoch := strconv.FormatInt(p.Committed, 10), p.Holder, strconv.FormatUint(p.Epoch, 10)
		if p.Committed < 0 {
			committed = "-"
		}
		if holder == "" {
			holder, epoch = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", p.Stream, p.Partition, committed, p.HighWatermark, p.Lag, holder, epoch, p.Metadata)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Members) == 0 {
		return nil
	}
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTREAM\tSESSION ENDS")
	for _, m := range d.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Member, m.Stream, time.UnixMilli(m.ExpiresMs).UTC().Format(time.RFC3339Nano))
	}
	return tw.Flush()
}

// namedConsume is loam consume STREAM --consumer NAME: a member of the named consumer that
// prints the records of the partitions leased to it from their committed offsets and
// commits as it goes (at every heartbeat, and when it stops). Without --follow it stops
// once every partition it holds reached the high watermark the stream had when it started;
// with --follow it follows its leases until interrupted or --max.
type namedConsume struct {
	k       *consumer
	name    string
	member  string
	session time.Duration
	follow  bool
}

func (n *namedConsume) run(ctx context.Context) (err error) {
	k := n.k
	st, err := k.c.GetStream(ctx, k.ns, k.stream)
	if err != nil {
		return err
	}
	hw := map[int32]int64{}
	for _, p := range st.PartitionInfo {
		hw[p.Partition] = p.HighWatermark
	}
	wait := min(k.wait, n.session/3)
	if !n.follow {
		wait = time.Millisecond // no long-poll: stop as soon as the partitions are read
	}
	m, err := k.c.NewConsumer(k.ns, n.name, k.stream, streamapi.ConsumerOptions{Member: n.member, Session: n.session,
		MaxBytes: k.maxBytes, MaxWait: wait})
	if err != nil {
		return err
	}
	defer func() {
		// Commit what was printed and leave, even when interrupted.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if cerr := m.Close(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("commit and leave: %w", cerr)
		}
	}()
	for ctx.Err() == nil {
		recs, err := m.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// With --follow a member outlives an unreachable node (it retries until
			// interrupted); without, only answers that say retry are retried.
			if !isRetriableAnswer(err) && !(n.follow && streamapi.IsRetriable(err)) {
				return err
			}
			fmt.Fprintf(k.stderr, "loam: consume: %s; retrying in %v\n", shortErr(err), fetchBackoff)
			if sleepErr := sleepCtx(ctx, fetchBackoff); sleepErr != nil {
				return nil
			}
			continue
		}
		before := k.count
		done, err := k.emit(recs, -1)
		if err != nil {
			return err
		}
		if printed := int(k.count - before); printed < len(recs) {
			// --max reached mid-batch: commit only what was printed.
			r := recs[printed]
			m.Seek(*r.Partition, *r.Offset)
		}
		if done {
			return nil
		}
		if !n.follow && len(recs) == 0 && caughtUp(m, hw) {
			return nil
		}
	}
	return nil
}

// caughtUp reports whether the member holds partitions and each reached its high
// watermark as of the start.
func caughtUp(m *streamapi.Consumer, hw map[int32]int64) bool {
	ls := m.Leases()
	if len(ls) == 0 {
		return false
	}
	for _, l := range ls {
		if pos, ok := m.Position(l.Partition); !ok || pos < hw[l.Partition] {
			return false
		}
	}
	return true
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

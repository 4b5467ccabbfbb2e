package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// loam consumer delete NAME and loam consumer reset NAME (docs/consumers.md).

const consumerDeleteUsage = `usage: loam consumer delete NAME [--force]

Deletes a named consumer: its committed offsets, members and leases. Refused while a member
is live unless --force (a member still running then re-creates the consumer at its next
heartbeat).
`

const consumerResetUsage = `usage: loam consumer reset NAME --stream STREAM (--to-earliest | --to-latest | --to-offset N | --to-timestamp T)
       [--partition P]... [--force] [--json]

Sets a named consumer's committed offsets on the stream's partitions (every partition
unless --partition is given, once per partition): to the log start, the high watermark, an
offset (clamped to both) or the start of the first chunk holding a record at or after a
time (RFC 3339, or ms since the epoch). Refused while a member is live on the stream
unless --force, which drops those members first. Prints each partition's new offset.
`

func runConsumerDelete(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("consumer delete", g)
	force := fs.Bool("force", false, "delete even while members are live")
	pos, err := parseArgs(fs, consumerDeleteUsage, args, stdout)
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
	if err := c.DeleteConsumer(ctx, g.namespace, pos[0], *force); err != nil {
		return fmt.Errorf("consumer delete %s: %w", pos[0], err)
	}
	fmt.Fprintf(stdout, "deleted consumer %s\n", pos[0])
	return nil
}

// partitionList is a repeatable --partition flag.
type partitionList []int32

func (p *partitionList) String() string { return fmt.Sprint([]int32(*p)) }
func (p *partitionList) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 0 {
		return fmt.Errorf("partition %q: want a partition number >= 0", s)
	}
	*p = append(*p, int32(v))
	return nil
}

// parseTime reads RFC 3339 or ms since the epoch.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("--to-timestamp %s: want ms since the epoch >= 0", s)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("--to-timestamp %q: want RFC 3339 (2026-12-01T12:00:00Z) or ms since the epoch", s)
	}
	return t.UnixMilli(), nil
}

func runConsumerReset(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("consumer reset", g)
	stream := fs.String("stream", "", "the stream whose offsets to reset (required)")
	earliest := fs.Bool("to-earliest", false, "to each partition's log start")
	latest := fs.Bool("to-latest", false, "to each partition's high watermark")
	offset := fs.String("to-offset", "", "to this offset (clamped to the log start and high watermark)")
	ts := fs.String("to-timestamp", "", "to the first chunk at or after this time (RFC 3339 or ms since the epoch)")
	var parts partitionList
	fs.Var(&parts, "partition", "a partition to reset (repeatable; default every partition)")
	force := fs.Bool("force", false, "drop the stream's live members first")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, consumerResetUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	if *stream == "" {
		return usagef("consumer reset: --stream is required (run 'loam help consumer reset')")
	}
	req := streamapi.ResetOffsetsRequest{Stream: *stream, Partitions: parts, Force: *force}
	var targets []string
	if *earliest {
		targets, req.To = append(targets, "--to-earliest"), streamapi.ResetEarliest
	}
	if *latest {
		targets, req.To = append(targets, "--to-latest"), streamapi.ResetLatest
	}
	if *offset != "" {
		v, err := strconv.ParseInt(*offset, 10, 64)
		if err != nil || v < 0 {
			return usagef("consumer reset: --to-offset %q: want an offset >= 0", *offset)
		}
		targets, req.To, req.Offset = append(targets, "--to-offset"), streamapi.ResetOffset, &v
	}
	if *ts != "" {
		ms, err := parseTime(*ts)
		if err != nil {
			return usagef("consumer reset: %v", err)
		}
		targets, req.To, req.TimestampMs = append(targets, "--to-timestamp"), streamapi.ResetTimestamp, &ms
	}
	if len(targets) != 1 {
		return usagef("consumer reset: give exactly one of --to-earliest, --to-latest, --to-offset, --to-timestamp (got %s)", strings.Join(append(targets, ""), " "))
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := c.ResetOffsets(ctx, g.namespace, pos[0], req)
	if err != nil {
		return fmt.Errorf("consumer reset %s: %w", pos[0], err)
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tPARTITION\tOFFSET")
	for _, o := range res.Offsets {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", *stream, o.Partition, o.Offset)
	}
	return tw.Flush()
}

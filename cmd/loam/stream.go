package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

const streamCreateUsage = `usage: loam stream create NAME [flags]

Creates a stream. Unset flags take the server's defaults: 1 partition, class standard,
retention 7 days (retention-ms 604800000; -1 keeps forever), cleanup policy delete, no key
attribute (OTLP records are keyless). Names are 1-249 characters of [a-zA-Z0-9._-].
Prints the stream created.
`

const streamListUsage = `usage: loam stream list [flags]

Lists the namespace's streams: name, partitions, class, retention and cleanup policy.
`

const streamDescribeUsage = `usage: loam stream describe NAME [flags]

Shows a stream's settings and, per partition, its log start (the first offset still
stored) and high watermark (the offset the next record will get).
`

const streamUpdateUsage = `usage: loam stream update NAME [flags]

Changes a stream: only the flags given are sent. Partitions may only grow.
--key-attribute "" clears the key attribute (OTLP records become keyless).
`

const streamDeleteUsage = `usage: loam stream delete NAME [flags]

Deletes a stream and all its records.
`

// optInt64 is an int64 flag that knows whether it was set.
type optInt64 struct {
	v   int64
	set bool
}

func (o *optInt64) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optInt64) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	o.v, o.set = v, true
	return nil
}

func (o *optInt64) ptr() *int64 {
	if !o.set {
		return nil
	}
	return &o.v
}

func (o *optInt64) ptr32(name string) (*int32, error) {
	if !o.set {
		return nil, nil
	}
	if o.v < 1 || o.v > 1<<31-1 {
		return nil, usagef("--%s %d: want a positive number", name, o.v)
	}
	v := int32(o.v)
	return &v, nil
}

func runStreamCreate(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("stream create", g)
	var partitions, retMs, retBytes optInt64
	fs.Var(&partitions, "partitions", "number of partitions `N` (default 1)")
	class := fs.String("class", "", "durability class: standard, express or quorum (default standard)")
	fs.Var(&retMs, "retention-ms", "keep records `MS` milliseconds; -1 forever (default -1)")
	fs.Var(&retBytes, "retention-bytes", "keep at most `BYTES` bytes per partition; -1 unbounded (default -1)")
	cleanup := fs.String("cleanup-policy", "", "delete (trim by retention) or compact (keep the latest record per key) (default delete)")
	keyAttr := fs.String("key-attribute", "", "OTLP attribute `NAME` whose value keys the stream's OTLP log records, e.g. service.name (default none: keyless)")
	leaderZone := fs.String("leader-zone", "", "class quorum: the `ZONE` the stream's journal leader should be in, its producers' zone (default none)")
	ifNotExists := fs.Bool("if-not-exists", false, "succeed when the stream already exists")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, streamCreateUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	if *cleanup != "" && *cleanup != "delete" && *cleanup != "compact" {
		return usagef("stream create: --cleanup-policy %q: want delete or compact", *cleanup)
	}
	req := streamapi.CreateStreamRequest{Name: pos[0], Class: *class, CleanupPolicy: *cleanup, KeyAttribute: *keyAttr,
		LeaderZone: *leaderZone, RetentionMs: retMs.ptr(), RetentionBytes: retBytes.ptr()}
	if req.Partitions, err = partitions.ptr32("partitions"); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	st, err := c.CreateStream(ctx, g.namespace, req)
	if err != nil {
		if *ifNotExists && streamapi.ErrorCode(err) == streamapi.CodeStreamExists {
			fmt.Fprintf(stdout, "stream %s already exists\n", pos[0])
			return nil
		}
		return fmt.Errorf("stream create %s: %w", pos[0], err)
	}
	if *asJSON {
		return printJSON(stdout, st)
	}
	fmt.Fprintf(stdout, "created stream %s: %d partitions, class %s, cleanup policy %s%s%s\n",
		st.Name, st.Partitions, st.Class, st.CleanupPolicy, keyAttributeNote(st.KeyAttribute), leaderZoneNote(st.LeaderZone))
	return nil
}

func runStreamList(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("stream list", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, streamListUsage, args, stdout)
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
	list, err := c.ListStreams(ctx, g.namespace)
	if err != nil {
		return fmt.Errorf("stream list: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, streamapi.ListStreamsResponse{Streams: list})
	}
	if len(list) == 0 {
		fmt.Fprintf(stderr, "no streams in namespace %q\n", g.namespace)
		return nil
	}
	zones := false // a LEADER ZONE column when a stream has a hint
	for _, st := range list {
		zones = zones || st.LeaderZone != ""
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	head := "NAME\tPARTITIONS\tCLASS\tRETENTION\tRETENTION BYTES\tCLEANUP"
	if zones {
		head += "\tLEADER ZONE"
	}
	fmt.Fprintln(tw, head)
	for _, st := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s", st.Name, st.Partitions, st.Class,
			retentionMs(st.RetentionMs), retentionBytes(st.RetentionBytes), st.CleanupPolicy)
		if zones {
			fmt.Fprintf(tw, "\t%s", cmpOr(st.LeaderZone, "-"))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func runStreamDescribe(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("stream describe", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, streamDescribeUsage, args, stdout)
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
	st, err := c.GetStream(ctx, g.namespace, pos[0])
	if err != nil {
		return fmt.Errorf("stream describe %s: %w", pos[0], err)
	}
	if *asJSON {
		return printJSON(stdout, st)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	rows := [][2]string{
		{"Name", st.Name},
		{"Namespace", st.Namespace},
		{"ID", strconv.FormatUint(st.ID, 10)},
		{"Partitions", strconv.Itoa(int(st.Partitions))},
		{"Class", st.Class},
		{"Encoding", st.Encoding},
		{"Retention", retentionMs(st.RetentionMs)},
		{"Retention bytes", retentionBytes(st.RetentionBytes)},
		{"Cleanup policy", st.CleanupPolicy},
		{"Key attribute", keyAttribute(st.KeyAttribute)},
	}
	if st.Class == "quorum" || st.LeaderZone != "" {
		rows = append(rows, [2]string{"Leader zone", cmpOr(st.LeaderZone, "none")})
	}
	rows = append(rows, [2]string{"Created", time.UnixMilli(st.CreatedAtMs).UTC().Format(time.RFC3339)})
	for _, row := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.PartitionInfo) == 0 {
		return nil
	}
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLOG START\tHIGH WATERMARK")
	for _, p := range st.PartitionInfo {
		fmt.Fprintf(tw, "%d\t%d\t%d\n", p.Partition, p.LogStart, p.HighWatermark)
	}
	return tw.Flush()
}

func runStreamUpdate(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("stream update", g)
	var partitions, retMs, retBytes optInt64
	fs.Var(&partitions, "partitions", "new number of partitions `N` (may only grow)")
	fs.Var(&retMs, "retention-ms", "keep records `MS` milliseconds; -1 forever")
	fs.Var(&retBytes, "retention-bytes", "keep at most `BYTES` bytes per partition; -1 unbounded")
	cleanup := fs.String("cleanup-policy", "", "delete or compact")
	var keyAttr, leaderZone optString
	fs.Var(&keyAttr, "key-attribute", "OTLP attribute `NAME` whose value keys the stream's OTLP log records; \"\" clears it (keyless)")
	fs.Var(&leaderZone, "leader-zone", "class quorum: the `ZONE` the stream's journal leader should be in; \"\" clears it")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, streamUpdateUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	req := streamapi.PatchStreamRequest{RetentionMs: retMs.ptr(), RetentionBytes: retBytes.ptr()}
	if req.Partitions, err = partitions.ptr32("partitions"); err != nil {
		return err
	}
	if *cleanup != "" {
		if *cleanup != "delete" && *cleanup != "compact" {
			return usagef("stream update: --cleanup-policy %q: want delete or compact", *cleanup)
		}
		req.CleanupPolicy = cleanup
	}
	if keyAttr.set {
		req.KeyAttribute = &keyAttr.v
	}
	if leaderZone.set {
		req.LeaderZone = &leaderZone.v
	}
	if req == (streamapi.PatchStreamRequest{}) {
		return usagef("stream update: nothing to change: give --partitions, --retention-ms, --retention-bytes, --cleanup-policy, --key-attribute or --leader-zone")
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	st, err := c.PatchStream(ctx, g.namespace, pos[0], req)
	if err != nil {
		return fmt.Errorf("stream update %s: %w", pos[0], err)
	}
	if *asJSON {
		return printJSON(stdout, st)
	}
	fmt.Fprintf(stdout, "updated stream %s: %d partitions, retention %s, retention bytes %s, cleanup policy %s%s%s\n",
		st.Name, st.Partitions, retentionMs(st.RetentionMs), retentionBytes(st.RetentionBytes), st.CleanupPolicy, keyAttributeNote(st.KeyAttribute),
		leaderZoneNote(st.LeaderZone))
	return nil
}

// leaderZoneNote is ", leader zone Z" for a stream with a leader zone hint, else "".
func leaderZoneNote(z string) string {
	if z == "" {
		return ""
	}
	return ", leader zone " + z
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// keyAttribute shows a stream's OTLP key attribute, "none (keyless)" when it has none.
func keyAttribute(a string) string {
	if a == "" {
		return "none (keyless)"
	}
	return a
}

// keyAttributeNote is ", key attribute A" for a stream with one, else "".
func keyAttributeNote(a string) string {
	if a == "" {
		return ""
	}
	return ", key attribute " + a
}

func runStreamDelete(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("stream delete", g)
	ifExists := fs.Bool("if-exists", false, "succeed when the stream does not exist")
	pos, err := parseArgs(fs, streamDeleteUsage, args, stdout)
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
	if err := c.DeleteStream(ctx, g.namespace, pos[0]); err != nil {
		if *ifExists && streamapi.ErrorCode(err) == streamapi.CodeStreamNotFound {
			fmt.Fprintf(stdout, "stream %s does not exist\n", pos[0])
			return nil
		}
		return fmt.Errorf("stream delete %s: %w", pos[0], err)
	}
	fmt.Fprintf(stdout, "deleted stream %s\n", pos[0])
	return nil
}

// retentionMs renders a time retention: "forever", or the largest whole unit (d, h, m, s)
// and the milliseconds.
func retentionMs(ms int64) string {
	if ms < 0 {
		return "forever"
	}
	for _, u := range []struct {
		ms   int64
		name string
	}{{24 * 3600 * 1000, "d"}, {3600 * 1000, "h"}, {60 * 1000, "m"}, {1000, "s"}} {
		if ms >= u.ms && ms%u.ms == 0 {
			return fmt.Sprintf("%d%s (%d ms)", ms/u.ms, u.name, ms)
		}
	}
	return fmt.Sprintf("%d ms", ms)
}

// retentionBytes renders a size retention: "unbounded", or bytes per partition.
func retentionBytes(n int64) string {
	if n < 0 {
		return "unbounded"
	}
	return fmt.Sprintf("%d per partition", n)
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	b, err := jsonIndent(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

var _ flag.Value = (*optInt64)(nil)

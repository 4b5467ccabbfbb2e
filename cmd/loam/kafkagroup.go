package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// Kafka consumer groups, read only: loam kafka-group list, loam kafka-group describe GROUP
// (docs/kafka-groups.md). Kafka clients join and commit through the Kafka gateway.

const kafkaGroupListUsage = `usage: loam kafka-group list [--json]

Lists the namespace's Kafka consumer groups with their generation.
`

const kafkaGroupDescribeUsage = `usage: loam kafka-group describe GROUP [--json]

Shows a Kafka consumer group's generation and, per committed partition, its committed
offset, high watermark and lag (high watermark - committed).
`

func runKafkaGroupList(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("kafka-group list", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, kafkaGroupListUsage, args, stdout)
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
	gs, err := c.ListKafkaGroups(ctx, g.namespace)
	if err != nil {
		return fmt.Errorf("kafka-group list: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, streamapi.KafkaGroupList{Groups: gs})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tGENERATION\tPROTOCOL TYPE\tUPDATED")
	for _, k := range gs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", k.Group, k.Generation, k.ProtocolType, time.UnixMilli(k.UpdatedMs).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func runKafkaGroupDescribe(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("kafka-group describe", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, kafkaGroupDescribeUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "GROUP"); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	d, err := c.DescribeKafkaGroup(ctx, g.namespace, pos[0])
	if err != nil {
		return fmt.Errorf("kafka-group describe %s: %w", pos[0], err)
	}
	if *asJSON {
		return printJSON(stdout, d)
	}
	fmt.Fprintf(stdout, "group %s, generation %d (epoch %d), protocol type %s\n", d.Group, d.Generation, d.Epoch, d.ProtocolType)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tHIGH WATERMARK\tLAG\tMETADATA")
	for _, p := range d.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Topic, p.Partition, p.Committed, p.HighWatermark, p.Lag, p.Metadata)
	}
	return tw.Flush()
}

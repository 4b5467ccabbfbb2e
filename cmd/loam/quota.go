package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/loamhq/loam/shared/streamapi"
)

// loam quota get and loam quota set (docs/quotas.md): a namespace's ingest quota over
// GET and PUT /v1/namespaces/{ns}/quota.

const quotaGetUsage = `usage: loam quota get [--json]

Shows the namespace's ingest quota: the produce request bytes per second the cluster admits
for it, across all log nodes ("none" when it has no quota).
`

const quotaSetUsage = `usage: loam quota set BYTES_PER_SEC [--json]

Sets the namespace's ingest quota: BYTES_PER_SEC is a byte count with an optional suffix
(k, M, G: powers of 1024, KiB, MiB, GiB also accepted), or 0 or "none" to remove it.
`

func runQuotaGet(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("quota get", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, quotaGetUsage, args, stdout)
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
	q, err := c.GetQuota(ctx, g.namespace)
	if err != nil {
		return fmt.Errorf("quota get: %w", err)
	}
	return printQuota(stdout, g.namespace, q, *asJSON)
}

func runQuotaSet(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("quota set", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, quotaSetUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "BYTES_PER_SEC"); err != nil {
		return err
	}
	rate, err := parseRate(pos[0])
	if err != nil {
		return usagef("quota set: %v", err)
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	q, err := c.SetQuota(ctx, g.namespace, rate)
	if err != nil {
		return fmt.Errorf("quota set: %w", err)
	}
	return printQuota(stdout, g.namespace, q, *asJSON)
}

func printQuota(w io.Writer, ns string, q streamapi.Quota, asJSON bool) error {
	if asJSON {
		return printJSON(w, q)
	}
	if q.IngestBytesPerSec == 0 {
		_, err := fmt.Fprintf(w, "namespace %s: no ingest quota\n", ns)
		return err
	}
	_, err := fmt.Fprintf(w, "namespace %s: ingest quota %d bytes/s (%s/s)\n", ns, q.IngestBytesPerSec, humanBytes(q.IngestBytesPerSec))
	return err
}

// parseRate reads a byte rate: digits with an optional k/M/G (or KiB/MiB/GiB) suffix, or
// "none" (0).
func parseRate(s string) (int64, error) {
	if s == "none" {
		return 0, nil
	}
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("%q: want a byte rate >= 0 such as 1048576, 512k, 10M or 1G, or none", s)
	}
	return v * mult, nil
}

// humanBytes prints n in the largest binary unit that keeps it >= 1.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', -1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', -1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/streamapitest"
)

func TestMain(m *testing.M) {
	// The tests say what they mean with flags; the caller's environment must not change it.
	for _, v := range []string{"LOAM_SERVER", "LOAM_NAMESPACE", "LOAM_API_KEY"} {
		os.Unsetenv(v)
	}
	os.Exit(m.Run())
}

// fixedClock is 2026-11-29T15:30:00Z.
func fixedClock() time.Time { return time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC) }

type env struct {
	t    *testing.T
	fake *streamapitest.Server
	url  string
}

func newEnv(t *testing.T, opts ...streamapitest.Option) *env {
	t.Helper()
	fake := streamapitest.New(append([]streamapitest.Option{streamapitest.WithClock(fixedClock)}, opts...)...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return &env{t: t, fake: fake, url: srv.URL}
}

type result struct {
	code           int
	stdout, stderr string
}

// loam runs the command with --server pointing at the fake.
func (e *env) loam(stdin string, args ...string) result {
	e.t.Helper()
	return e.loamCtx(e.t.Context(), strings.NewReader(stdin), args...)
}

func (e *env) loamCtx(ctx context.Context, stdin io.Reader, args ...string) result {
	var out, errOut strings.Builder
	code := run(ctx, append([]string{"--server", e.url}, args...), stdin, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// must runs the command and fails the test unless it exits 0.
func (e *env) must(stdin string, args ...string) string {
	e.t.Helper()
	r := e.loam(stdin, args...)
	if r.code != 0 {
		e.t.Fatalf("loam %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// check is one command and what it must answer: exit code, exact stdout (when
// stdoutIs is set) or fragments of stdout and stderr.
type check struct {
	args      []string
	stdin     string
	code      int
	stdoutIs  *string
	stdoutHas []string
	stderrHas []string
}

func (e *env) run(checks []check) {
	e.t.Helper()
	for _, c := range checks {
		r := e.loam(c.stdin, c.args...)
		name := strings.Join(c.args, " ")
		if r.code != c.code {
			e.t.Errorf("loam %s: exit %d, want %d\nstdout: %s\nstderr: %s", name, r.code, c.code, r.stdout, r.stderr)
			continue
		}
		if c.stdoutIs != nil && r.stdout != *c.stdoutIs {
			e.t.Errorf("loam %s: stdout\n%s\nwant\n%s", name, r.stdout, *c.stdoutIs)
		}
		for _, s := range c.stdoutHas {
			if !strings.Contains(r.stdout, s) {
				e.t.Errorf("loam %s: stdout lacks %q:\n%s", name, s, r.stdout)
			}
		}
		for _, s := range c.stderrHas {
			if !strings.Contains(r.stderr, s) {
				e.t.Errorf("loam %s: stderr lacks %q:\n%s", name, s, r.stderr)
			}
		}
	}
}

func str(s string) *string { return &s }

func args(s string) []string { return strings.Fields(s) }

func TestStreamCommands(t *testing.T) {
	e := newEnv(t)
	e.run([]check{
		{args: args("stream create orders --partitions 3 --cleanup-policy compact"),
			stdoutIs: str("created stream orders: 3 partitions, class standard, cleanup policy compact\n")},
		{args: args("stream create orders"), code: 1, stderrHas: []string{"stream create orders:", "stream_exists", "HTTP 409"}},
		{args: args("stream create orders --if-not-exists"), stdoutIs: str("stream orders already exists\n")},
		{args: args("stream create audit --retention-ms 86400000 --retention-bytes 1048576"), stdoutHas: []string{"created stream audit: 1 partitions"}},
		{args: []string{"stream", "create", "bad name"}, code: 1, stderrHas: []string{"invalid_argument", "invalid stream name"}},
		{args: args("stream create x --class express"), code: 1, stderrHas: []string{"unsupported_class"}},
		{args: args("stream create x --class gold"), code: 1, stderrHas: []string{"invalid_argument"}},
		{args: args("stream create x --leader-zone az-a"), code: 1, stderrHas: []string{"invalid_argument", "leader_zone", "class quorum", "HTTP 400"}},
		{args: args("stream update orders --leader-zone az-a"), code: 1, stderrHas: []string{"invalid_argument", "leader_zone", "HTTP 400"}},
		{args: args("stream create x --partitions 0"), code: 2, stderrHas: []string{"--partitions 0"}},
		{args: args("stream create x --partitions two"), code: 2, stderrHas: []string{`"two" is not an integer`}},
		{args: args("stream create x --cleanup-policy bogus"), code: 2, stderrHas: []string{"want delete or compact"}},
		{args: args("stream create"), code: 2, stderrHas: []string{"missing NAME"}},
		{args: args("stream create a b"), code: 2, stderrHas: []string{`unexpected argument "b"`}},
		{args: args("stream list"), stdoutIs: str(
			"NAME    PARTITIONS  CLASS     RETENTION          RETENTION BYTES        CLEANUP\n" +
				"audit   1           standard  1d (86400000 ms)   1048576 per partition  delete\n" +
				"orders  3           standard  7d (604800000 ms)  unbounded              compact\n")},
		{args: args("streams"), stdoutHas: []string{"audit", "orders"}},
		{args: args("stream describe orders"), stdoutIs: str(
			"Name:             orders\n" +
				"Namespace:        default\n" +
				"ID:               1\n" +
				"Partitions:       3\n" +
				"Class:            standard\n" +
				"Encoding:         kafka\n" +
				"Retention:        7d (604800000 ms)\n" +
				"Retention bytes:  unbounded\n" +
				"Cleanup policy:   compact\n" +
				"Key attribute:    none (keyless)\n" +
				"Created:          2026-11-29T15:30:00Z\n" +
				"\n" +
				"PARTITION  LOG START  HIGH WATERMARK\n" +
				"0          0          0\n" +
				"1          0          0\n" +
				"2          0          0\n")},
		{args: args("stream describe nope"), code: 1, stderrHas: []string{"stream describe nope: stream_not_found", "HTTP 404"}},
		{args: args("stream update orders --partitions 5 --retention-ms 90000 --cleanup-policy delete"),
			stdoutIs: str("updated stream orders: 5 partitions, retention 90s (90000 ms), retention bytes unbounded, cleanup policy delete\n")},
		{args: args("stream update orders"), code: 2, stderrHas: []string{"nothing to change"}},
		{args: args("stream create logs --key-attribute service.name"),
			stdoutIs: str("created stream logs: 1 partitions, class standard, cleanup policy delete, key attribute service.name\n")},
		{args: args("stream describe logs"), stdoutHas: []string{"Key attribute:    service.name\n"}},
		{args: args("stream update logs --key-attribute host.name"), stdoutHas: []string{"cleanup policy delete, key attribute host.name\n"}},
		{args: []string{"stream", "update", "logs", "--key-attribute", ""}, stdoutHas: []string{"cleanup policy delete\n"}},
		{args: args("stream describe logs"), stdoutHas: []string{"Key attribute:    none (keyless)\n"}},
		{args: args("stream update logs --key-attribute " + strings.Repeat("k", 256)), code: 1, stderrHas: []string{"invalid_argument", "key_attribute", "HTTP 400"}},
		{args: args("stream delete logs")},
		{args: args("stream update orders --partitions 2"), code: 1, stderrHas: []string{"invalid_argument", "only grow"}},
		{args: args("stream delete orders"), stdoutIs: str("deleted stream orders\n")},
		{args: args("stream delete orders"), code: 1, stderrHas: []string{"stream_not_found"}},
		{args: args("stream rm orders --if-exists"), stdoutIs: str("stream orders does not exist\n")},
		{args: args("--namespace elsewhere stream list"), code: 1, stderrHas: []string{"namespace_not_found"}},
		{args: args("stream list --namespace elsewhere"), code: 1, stderrHas: []string{"namespace_not_found"}},
		{args: args("stream delete audit")},
		{args: args("stream list"), stdoutIs: str(""), stderrHas: []string{`no streams in namespace "default"`}},
	})
}

func TestStreamJSONOutput(t *testing.T) {
	e := newEnv(t)
	var st streamapi.Stream
	if err := json.Unmarshal([]byte(e.must("", "stream", "create", "s", "--partitions", "2", "--json")), &st); err != nil || st.Partitions != 2 {
		t.Fatalf("create --json: %+v, %v", st, err)
	}
	e.must("", "produce", "s", "--partition", "1", "--value", "x")
	if err := json.Unmarshal([]byte(e.must("", "stream", "describe", "s", "--json")), &st); err != nil ||
		len(st.PartitionInfo) != 2 || st.PartitionInfo[1].HighWatermark != 1 {
		t.Fatalf("describe --json: %+v, %v", st, err)
	}
	var list streamapi.ListStreamsResponse
	if err := json.Unmarshal([]byte(e.must("", "stream", "list", "--json")), &list); err != nil || len(list.Streams) != 1 {
		t.Fatalf("list --json: %+v, %v", list, err)
	}
}

// Lines go in as values and come back out exactly, whatever they hold.
func TestProduceConsumeRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.must("", "stream", "create", "s", "--partitions", "2")
	lines := []string{
		`{"id": 1, "tags": ["<a>", "&"]}`, // JSON, spacing and HTML kept
		"plain text",
		"  42  ", // JSON with spaces around: sent as JSON, the spaces are lost
		"\xff\xfe binary",
		"null", // a tombstone
		"",     // skipped
		"windows line\r",
		"\"quoted\"",
		"last line without newline",
	}
	in := strings.Join(lines, "\n")
	out := e.must(in, "produce", "s", "--partition", "1")
	want := ""
	for i := range 8 {
		want += fmt.Sprintf("partition=1 offset=%d\n", i)
	}
	if out != want {
		t.Fatalf("produce printed\n%s\nwant\n%s", out, want)
	}
	got := e.must("", "consume", "s")
	wantValues := strings.Join([]string{
		`{"id": 1, "tags": ["<a>", "&"]}`, "plain text", "42", "\xff\xfe binary", "null",
		"windows line", "\"quoted\"", "last line without newline",
	}, "\n") + "\n"
	if got != wantValues {
		t.Fatalf("consume printed\n%q\nwant\n%q", got, wantValues)
	}
	// The json format carries each record whole.
	jsonOut := e.must("", "consume", "s", "--partition", "1", "--format", "json")
	recs := strings.Split(strings.TrimSuffix(jsonOut, "\n"), "\n")
	if len(recs) != 8 {
		t.Fatalf("%d json lines:\n%s", len(recs), jsonOut)
	}
	for i, line := range recs {
		var r streamapi.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		if *r.Offset != int64(i) || *r.Partition != 1 || r.Timestamp == nil {
			t.Errorf("line %d: %s", i, line)
		}
	}
	if !strings.Contains(recs[0], `"value":{"id": 1, "tags": ["<a>", "&"]}`) || !strings.Contains(recs[3], `"value_base64":"//4gYmluYXJ5"`) ||
		!strings.Contains(recs[4], `"value":null`) {
		t.Errorf("json lines:\n%s", jsonOut)
	}
}

func TestProduceKeysHeadersPartitions(t *testing.T) {
	e := newEnv(t)
	e.must("", "stream", "create", "s", "--partitions", "4")
	// One key: every record in the key's partition, murmur2("user-1") % 4 = 0.
	out := e.must("a\nb\n", "produce", "s", "--key", "user-1", "--header", "trace=t1", "--header", "src=cli", "--header", "trace=t2")
	if out != "partition=0 offset=0\npartition=0 offset=1\n" {
		t.Fatalf("keyed produce: %s", out)
	}
	// A key per line.
	out = e.must("k1:v1\nno separator\nk1:v:2\n", "produce", "s", "--key-separator", ":")
	if len(strings.Split(strings.TrimSpace(out), "\n")) != 3 {
		t.Fatalf("key-separator produce: %s", out)
	}
	// One record from the command line, to an explicit partition.
	// (The keyless line above went to any partition, 3 included: the offset is not known.)
	if out := e.must("ignored stdin", "produce", "s", "--value", `{"x": 1}`, "--partition", "3", "--key", "\xff"); !regexp.MustCompile(`^partition=3 offset=[01]\n$`).MatchString(out) {
		t.Fatalf("--value produce: %s", out)
	}
	// An empty value is a value, not a tombstone.
	e.must("", "produce", "s", "--value", "", "--partition", "0")

	var recs []streamapi.Record
	for _, line := range strings.Split(strings.TrimSpace(e.must("", "consume", "s", "--format", "json")), "\n") {
		var r streamapi.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 7 {
		t.Fatalf("%d records", len(recs))
	}
	find := func(value string) streamapi.Record {
		for _, r := range recs {
			if v, _ := r.Bytes(); string(v) == value {
				return r
			}
		}
		t.Fatalf("no record with value %q", value)
		return streamapi.Record{}
	}
	if r := find("a"); *r.Key != "user-1" || *r.Partition != 0 ||
		!r.Headers.Equal(streamapi.Headers{streamapi.StringHeader("trace", "t1"), streamapi.StringHeader("src", "cli"), streamapi.StringHeader("trace", "t2")}) {
		t.Errorf("record a: %+v", r)
	}
	if r := find("v1"); r.Key == nil || *r.Key != "k1" {
		t.Errorf("record v1: %+v", r)
	}
	if r := find("v:2"); r.Key == nil || *r.Key != "k1" {
		t.Errorf("record v:2: %+v", r)
	}
	if r := find("no separator"); r.Key != nil || r.KeyBase64 != nil {
		t.Errorf("line without separator has a key: %+v", r)
	}
	if r := find(`{"x": 1}`); *r.Partition != 3 || string(r.KeyBase64) != "\xff" {
		t.Errorf("--value record: %+v", r)
	}
	if r := find(""); r.IsTombstone() || *r.Partition != 0 {
		t.Errorf("empty value: %+v", r)
	}
}

// Batches respect both limits, keep the line order, and fill up when stdin is faster than
// the server.
func TestProduceBatching(t *testing.T) {
	const n = 3000
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "line-%04d\n", i) // 9 bytes and a newline
	}
	for _, c := range []struct {
		flags      []string
		maxRecords int
	}{
		{nil, 5000},
		{[]string{"--batch-records", "500"}, 500},
		{[]string{"--batch-bytes", "90"}, 10}, // 10 lines of 9 bytes
		{[]string{"--batch-records", "7", "--batch-bytes", "1000000"}, 7},
	} {
		e := newEnv(t)
		e.must("", "stream", "create", "s")
		e.must(in.String(), append([]string{"produce", "s", "-q"}, c.flags...)...)
		batches := e.fake.ProduceBatches()
		total := 0
		for _, b := range batches {
			if b < 1 || b > c.maxRecords {
				t.Errorf("produce %v: a batch of %d records, limit %d", c.flags, b, c.maxRecords)
			}
			total += b
		}
		// Stdin is a string: read ahead, it keeps the batches mostly full (a loaded machine
		// may send a few partial ones while the reader catches up: 16 for 6 was seen).
		if full := (n + c.maxRecords - 1) / c.maxRecords; total != n || len(batches) > 3*full+4 {
			t.Errorf("produce %v: %d records in %d batches, want %d in about %d", c.flags, total, len(batches), n, full)
		}
		if out := e.must("", "consume", "s"); out != in.String() {
			t.Errorf("produce %v: consumed %d bytes, want %d, in order", c.flags, len(out), in.Len())
		}
	}
}

// An interactive line is sent when typed, not when stdin ends.
func TestProduceInteractive(t *testing.T) {
	e := newEnv(t)
	e.must("", "stream", "create", "s")
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	go func() { done <- e.loamCtx(t.Context(), pr, "produce", "s") }()
	c, _ := streamapi.NewClient(e.url)
	if _, err := pw.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := c.Fetch(t.Context(), "default", "s", 0, 0, 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first line was not sent before stdin ended")
		}
	}
	pw.Write([]byte("second\n"))
	pw.Close()
	r := <-done
	if r.code != 0 || r.stdout != "partition=0 offset=0\npartition=0 offset=1\n" {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestProduceErrors(t *testing.T) {
	e := newEnv(t)
	e.must("", "stream", "create", "s")
	// Refused without writing: retried, then succeeds.
	e.fake.FailNext(2, 503, streamapi.ErrorDetail{Code: streamapi.CodeUnavailable, Message: "sequencer down", Retriable: true})
	r := e.loam("a\n", "produce", "s")
	if r.code != 0 || r.stdout != "partition=0 offset=0\n" || strings.Count(r.stderr, "retrying") != 2 {
		t.Fatalf("after 2 unavailable: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Outcome unknown: not retried, and said so.
	e.fake.FailNext(1, 503, streamapi.ErrorDetail{Code: streamapi.CodeCommitUnknown, Message: "commit timed out", Retriable: true})
	r = e.loam("b\nc\n", "produce", "s")
	// Both lines usually go in one batch; on a busy machine the first may go alone (a batch
	// goes as soon as no further line is waiting), and the answer names that batch.
	if r.code != 1 || !(strings.Contains(r.stderr, "0 records acknowledged; the next 2 may or may not have been written") ||
		strings.Contains(r.stderr, "0 records acknowledged; the next 1 may or may not have been written")) ||
		!strings.Contains(r.stderr, "commit_unknown: commit timed out") {
		t.Fatalf("commit_unknown: exit %d\n%s", r.code, r.stderr)
	}
	e.run([]check{
		{args: args("produce nope --value x"), code: 1, stderrHas: []string{"produce nope:", "the next 1 were not written", "stream_not_found"}},
		{args: args("produce s --value x --partition 5"), code: 1, stderrHas: []string{"partition_not_found"}},
		{args: args("produce s --value x --partition -2"), code: 2},
		{args: args("produce s --key k --key-separator :"), code: 2, stderrHas: []string{"exclude each other"}},
		{args: args("produce s --header novalue"), code: 2, stderrHas: []string{"want NAME=VALUE"}},
		{args: args("produce"), code: 2, stderrHas: []string{"missing STREAM"}},
		{args: args("produce s --batch-records 0"), code: 2},
	})
}

func TestConsumeOffsetsAndLimits(t *testing.T) {
	e := newEnv(t)
	e.must("", "stream", "create", "s", "--partitions", "2")
	e.must("a0\na1\na2\na3\n", "produce", "s", "--partition", "0")
	e.must("b0\nb1\n", "produce", "s", "--partition", "1")
	if err := e.fake.Trim("default", "s", 0, 1); err != nil {
		t.Fatal(err)
	}
	e.run([]check{
		{args: args("consume s"), stdoutIs: str("a1\na2\na3\nb0\nb1\n")},
		{args: args("consume s --offset earliest --partition 1"), stdoutIs: str("b0\nb1\n")},
		{args: args("consume s --offset 2 --partition 0"), stdoutIs: str("a2\na3\n")},
		{args: args("consume s --offset 4 --partition 0"), stdoutIs: str("")},
		{args: args("consume s --offset latest"), stdoutIs: str("")},
		{args: args("consume s --max 4"), stdoutIs: str("a1\na2\na3\nb0\n")},
		{args: args("consume s --max 2 --partition 1"), stdoutIs: str("b0\nb1\n")},
		{args: args("consume s --max-bytes 1"), stdoutIs: str("a1\na2\na3\nb0\nb1\n")},
		{args: args("consume s --offset 0 --partition 0"), code: 1, stderrHas: []string{"partition 0: offset 0 is outside [1, 4]"}},
		{args: args("consume s --offset 3"), code: 1, stderrHas: []string{"partition 1: offset 3 is outside [0, 2]"}},
		{args: args("consume s --partition 2"), code: 1, stderrHas: []string{"partition 2 does not exist"}},
		{args: args("consume nope"), code: 1, stderrHas: []string{"consume nope:", "stream_not_found"}},
		{args: args("consume s --offset soon"), code: 2, stderrHas: []string{"want earliest, latest or an offset"}},
		{args: args("consume s --format xml"), code: 2},
		{args: args("consume s --max -1"), code: 2},
		{args: args("consume"), code: 2},
	})
	// A fetch refused as retriable is retried.
	e.fake.FailNext(1, 503, streamapi.ErrorDetail{Code: streamapi.CodeUnavailable, Message: "busy", Retriable: true})
	r := e.loam("", "consume", "s", "--partition", "1")
	if r.code != 0 || r.stdout != "b0\nb1\n" || !strings.Contains(r.stderr, "retrying") {
		t.Fatalf("consume after a 503: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// consume --follow sees records produced after it started, from every partition, and
// ends at --max or when interrupted, with exit status 0 either way.
func TestConsumeFollow(t *testing.T) {
	e := newEnv(t)
	e.must("", "stream", "create", "s", "--partitions", "3")
	e.must("old\n", "produce", "s", "--partition", "0")

	maxedCh := make(chan result, 1)
	go func() {
		maxedCh <- e.loamCtx(t.Context(), strings.NewReader(""), "consume", "s", "--follow", "--offset", "latest", "--max", "2", "--format", "json")
	}()
	ctx, cancel := context.WithCancel(t.Context())
	interruptedCh := make(chan result, 1)
	go func() {
		interruptedCh <- e.loamCtx(ctx, strings.NewReader(""), "consume", "s", "-f", "--partition", "2")
	}()
	// Both consumers must have read the stream (and so fixed their start offsets) before
	// the records exist: 2 requests so far, then per consumer a GetStream and a fetch per
	// partition.
	waitFor(t, func() bool { return e.fake.Requests() >= 2+(1+3)+(1+1) })
	e.must("", "produce", "s", "--partition", "2", "--value", "new-2")
	e.must("", "produce", "s", "--partition", "1", "--value", "new-1")
	var maxed result
	select {
	case maxed = <-maxedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("consume --follow --max 2 did not end")
	}
	// The interrupted consumer sees its record, then the interrupt.
	waitFor(t, func() bool { return e.fake.Requests() >= 2+(1+3)+(1+1)+2+1 })
	time.Sleep(100 * time.Millisecond)
	cancel()
	interrupted := <-interruptedCh
	if maxed.code != 0 {
		t.Fatalf("--max 2: exit %d: %s", maxed.code, maxed.stderr)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(maxed.stdout), "\n") {
		var r streamapi.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		v, _ := r.Bytes()
		got = append(got, fmt.Sprintf("%d:%s", *r.Partition, v))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"1:new-1", "2:new-2"}) {
		t.Errorf("--follow --max 2 printed %v", got)
	}
	if interrupted.code != 0 || interrupted.stdout != "new-2\n" {
		t.Errorf("interrupted --follow: exit %d, stdout %q, stderr %q", interrupted.code, interrupted.stdout, interrupted.stderr)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGlobalFlagsAndEnv(t *testing.T) {
	e := newEnv(t, streamapitest.WithAPIKey("k3y"), streamapitest.WithNamespaces("default", "team"))
	e.run([]check{
		{args: args("stream list"), code: 1, stderrHas: []string{"unauthorized", "HTTP 401"}},
		{args: args("--api-key k3y --namespace team stream create t1"), stdoutHas: []string{"created stream t1"}},
		{args: args("stream list --api-key k3y --namespace team"), stdoutHas: []string{"t1"}},
		{args: args("--api-key k3y stream list"), stderrHas: []string{"no streams"}},
	})
	t.Setenv("LOAM_SERVER", strings.TrimPrefix(e.url, "http://")) // no scheme: http assumed
	t.Setenv("LOAM_NAMESPACE", "team")
	t.Setenv("LOAM_API_KEY", "k3y")
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"stream", "list"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "t1") {
		t.Fatalf("from the environment: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	// Flags beat the environment.
	out.Reset()
	if code := run(t.Context(), []string{"stream", "list", "--namespace", "default"}, strings.NewReader(""), &out, &errOut); code != 0 || out.String() != "" {
		t.Fatalf("flag over env: exit %d\n%s", code, out.String())
	}
}

func TestUsage(t *testing.T) {
	e := newEnv(t)
	e.run([]check{
		{args: nil, code: 2, stderrHas: []string{"Commands:", "no command given"}},
		{args: args("help"), stdoutHas: []string{"Commands:", "stream create NAME", "LOAM_SERVER", "Exit status"}},
		{args: args("--help"), stdoutHas: []string{"Commands:"}},
		{args: args("help produce"), stdoutHas: []string{"usage: loam produce STREAM", "-batch-records", "-server"}},
		{args: args("help stream describe"), stdoutHas: []string{"usage: loam stream describe NAME", "-json"}},
		{args: args("consume -h"), stdoutHas: []string{"usage: loam consume STREAM", "-follow"}},
		{args: args("stream create --help"), stdoutHas: []string{"-retention-ms"}},
		{args: args("help nope"), code: 2, stderrHas: []string{`unknown command "nope"`}},
		{args: args("nope"), code: 2, stderrHas: []string{`unknown command "nope"`}},
		{args: args("stream"), code: 2, stderrHas: []string{"want a subcommand"}},
		{args: args("stream frobnicate x"), code: 2, stderrHas: []string{"want a subcommand"}},
		{args: args("--bogus stream list"), code: 2, stderrHas: []string{"flag provided but not defined: -bogus"}},
		{args: args("stream list --bogus"), code: 2, stderrHas: []string{"stream list: flag provided but not defined: -bogus", "loam help stream list"}},
		{args: args("version"), stdoutHas: []string{"loam ", "go1."}},
		{args: args("version extra"), code: 2},
	})
}

func TestNetworkFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, c := range []struct {
		args      []string
		code      int
		stderrHas []string
		retries   int
	}{
		{args("stream list"), 1, []string{"stream list: cannot reach http://" + addr + "/v1/namespaces/default/streams", "is the server running?"}, 0},
		// Nothing was sent, so produce retries and then says nothing was written.
		{args("produce s --value x"), 1, []string{"0 records acknowledged, the next 1 were not written", "is the server running?"}, produceRetries},
		// consume fails at once when the server cannot be reached at the start.
		{args("consume s"), 1, []string{"consume s: cannot reach"}, 0},
	} {
		var out, errOut strings.Builder
		code := run(t.Context(), append([]string{"--server", addr}, c.args...), strings.NewReader(""), &out, &errOut)
		if code != c.code || strings.Count(errOut.String(), "retrying") != c.retries {
			t.Errorf("%v: exit %d, stderr:\n%s", c.args, code, errOut.String())
		}
		for _, s := range c.stderrHas {
			if !strings.Contains(errOut.String(), s) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, s, errOut.String())
			}
		}
	}
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"--server", "ftp://x", "stream", "list"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("bad --server: exit %d", code)
	}
}

func TestRetentionFormat(t *testing.T) {
	for ms, want := range map[int64]string{
		-1: "forever", 0: "0 ms", 1: "1 ms", 1500: "1500 ms", 2000: "2s (2000 ms)", 90000: "90s (90000 ms)",
		3600000: "1h (3600000 ms)", 604800000: "7d (604800000 ms)", 5400000: "90m (5400000 ms)",
	} {
		if got := retentionMs(ms); got != want {
			t.Errorf("retentionMs(%d) = %q, want %q", ms, got, want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		in       []string
		pos      []string
		n        int
		key      string
		wantCode bool // a usage error
	}{
		{in: args("a b"), pos: args("a b")},
		{in: args("a --n 3 b"), pos: args("a b"), n: 3},
		{in: args("--n 3 a --key k"), pos: args("a"), n: 3, key: "k"},
		{in: args("a -- --n 3"), pos: args("a --n 3")},
		{in: args("-- -a"), pos: args("-a")},
		{in: args("a --n"), wantCode: true},
		{in: args("a --n x"), wantCode: true},
		{in: nil, pos: nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := fs.Int("n", 0, "")
		key := fs.String("key", "", "")
		pos, err := parseArgs(fs, "usage", c.in, io.Discard)
		var ue usageError
		if c.wantCode {
			if err == nil || !errors.As(err, &ue) {
				t.Errorf("%q: %v, want a usage error", c.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(pos, c.pos) || *n != c.n || *key != c.key {
			t.Errorf("%q: pos %q n %d key %q err %v", c.in, pos, *n, *key, err)
		}
	}
}

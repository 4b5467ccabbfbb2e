package kafka_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Consumer groups through clients other than franz-go: kcat's balanced consumer (-G,
// librdkafka's classic group protocol) and kafkajs's consumer. Each consumes every record
// once, commits, and a second run of the group gets only the records produced after.

func (e *env) produceValues(t *testing.T, topic string, from, n int) {
	t.Helper()
	// Uncompressed: kafkajs reads no snappy without a codec package.
	p := e.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%03d", i))})
	}
	if err := p.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committed sums a group's committed offsets of topic.
func (e *env) committed(t *testing.T, group, topic string) int64 {
	t.Helper()
	offs, err := e.admin(t).FetchOffsets(ctx(t), group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, ps := range offs[topic] {
		if ps.Err != nil {
			t.Fatal(ps.Err)
		}
		sum += ps.At
	}
	return sum
}

func wantValues(t *testing.T, who string, got []string, from, n int) {
	t.Helper()
	var want []string
	for i := from; i < from+n; i++ {
		want = append(want, fmt.Sprintf("v%03d", i))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%s consumed %d records %v, want %v", who, len(got), got, want)
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "v") {
			out = append(out, l)
		}
	}
	return out
}

// TestKcatGroupConsume: kcat -G joins a group, consumes every record once and commits; run
// again, it gets only the records produced since.
func TestKcatGroupConsume(t *testing.T) {
	_, err := exec.LookPath("kcat")
	need(t, "kcat", err == nil)
	e := start(t)
	e.createTopic(t, "kg", 3)
	e.produceValues(t, "kg", 0, 30)
	consume := func(n int) []string {
		return lines(run(t, "", "kcat", "-b", e.kafka, "-G", "kcat-group", "-c", fmt.Sprint(n), "-q", "-f", "%s\n",
			"-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true", "kg"))
	}
	wantValues(t, "kcat -G", consume(30), 0, 30)
	if c := e.committed(t, "kcat-group", "kg"); c != 30 {
		t.Fatalf("kcat -G committed %d records, want 30", c)
	}
	e.produceValues(t, "kg", 30, 10)
	wantValues(t, "kcat -G, second run", consume(10), 30, 10)
	if c := e.committed(t, "kcat-group", "kg"); c != 40 {
		t.Fatalf("after the second run: committed %d, want 40", c)
	}
}

// TestKafkaJSGroupConsumer: a kafkajs consumer of a group reads every record once from the
// start and commits; a second consumer of the group gets only the later records.
func TestKafkaJSGroupConsumer(t *testing.T) {
	mod := filepath.Join(repoRoot(t), ".tools", "node", "node_modules", "kafkajs")
	_, err := os.Stat(mod)
	_, nerr := exec.LookPath("node")
	need(t, "kafkajs (npm, under .tools/node)", err == nil && nerr == nil)
	e := start(t)
	e.createTopic(t, "jsg", 3)
	e.produceValues(t, "jsg", 0, 30)
	script := `
const { Kafka, logLevel } = require(process.argv[1]);
const want = parseInt(process.argv[3], 10);
(async () => {
  const kafka = new Kafka({ brokers: [process.argv[2]], clientId: 'jsg', logLevel: process.env.KJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING });
  const c = kafka.consumer({ groupId: 'js-group', sessionTimeout: 10000, heartbeatInterval: 1000 });
  c.on(c.events.CRASH, e => { console.error(e.payload.error); process.exit(1); });
  await c.connect();
  await c.subscribe({ topic: 'jsg', fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    c.run({ autoCommit: true, eachMessage: async ({ message }) => {
      got.push(message.value.toString());
      if (got.length >= want) resolve();
    } }).catch(reject);
  });
  await c.commitOffsets([]).catch(() => {});
  await c.disconnect(); // commits what was consumed
  for (const v of got) console.log(v);
})().catch(e => { console.error(e); process.exit(1); });
`
	consume := func(n int) []string { return lines(run(t, "", "node", "-e", script, mod, e.kafka, fmt.Sprint(n))) }
	wantValues(t, "kafkajs", consume(30), 0, 30)
	if c := e.committed(t, "js-group", "jsg"); c != 30 {
		t.Fatalf("kafkajs committed %d records, want 30", c)
	}
	e.produceValues(t, "jsg", 30, 10)
	wantValues(t, "kafkajs, second consumer", consume(10), 30, 10)
	if c := e.committed(t, "js-group", "jsg"); c != 40 {
		t.Fatalf("after the second consumer: committed %d, want 40", c)
	}
}

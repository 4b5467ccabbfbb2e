package kafka_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Real Kafka clients other than franz-go, each against a real log node: kcat (librdkafka),
// python3-confluent-kafka (librdkafka) and kafkajs (Node). .ci/tools.sh installs them; a
// missing one skips its test, or fails it with LOAM_REQUIRE_SERVERS=1.

func need(t *testing.T, name string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s is not installed (.ci/tools.sh installs it)", name)
	}
	t.Skipf("%s is not installed (.ci/tools.sh installs it)", name)
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKcat: kcat lists metadata, produces keyed records and consumes them back.
func TestKcat(t *testing.T) {
	_, err := exec.LookPath("kcat")
	need(t, "kcat", err == nil)
	e := start(t)
	e.createTopic(t, "kc", 2)
	md := run(t, "", "kcat", "-b", e.kafka, "-L", "-t", "kc")
	if !strings.Contains(md, `topic "kc" with 2 partitions`) {
		t.Fatalf("kcat -L:\n%s", md)
	}
	run(t, "a:1\nb:2\nc:3\n", "kcat", "-b", e.kafka, "-P", "-t", "kc", "-K", ":", "-X", "acks=all")
	out := run(t, "", "kcat", "-b", e.kafka, "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s@%p\n")
	for _, want := range []string{"a=1@", "b=2@", "c=3@"} {
		if !strings.Contains(out, want) {
			t.Fatalf("kcat consume lacks %q:\n%s", want, out)
		}
	}
}

// TestConfluentKafkaPython: python3-confluent-kafka produces and consumes (librdkafka
// with its defaults: idempotence off, acks=all).
func TestConfluentKafkaPython(t *testing.T) {
	have := exec.Command("python3", "-c", "import confluent_kafka").Run() == nil
	if !have { // the Debian package lives in the system python
		if _, err := os.Stat("/usr/bin/python3"); err == nil && exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run() == nil {
			have = true
		}
	}
	need(t, "python3-confluent-kafka", have)
	py := "python3"
	if exec.Command("python3", "-c", "import confluent_kafka").Run() != nil {
		py = "/usr/bin/python3"
	}
	e := start(t)
	e.createTopic(t, "py", 1)
	script := `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition
b = sys.argv[1]
p = Producer({'bootstrap.servers': b, 'acks': 'all'})
for i in range(100):
    p.produce('py', key=b'k%d' % i, value=b'v%d' % i, headers=[('h', b'x')])
assert p.flush(30) == 0
c = Consumer({'bootstrap.servers': b, 'group.id': 'unused', 'enable.auto.commit': False})
c.assign([TopicPartition('py', 0, 0)])
got = []
while len(got) < 100:
    m = c.poll(10)
    assert m is not None, 'poll timed out after %d' % len(got)
    assert m.error() is None, m.error()
    got.append((m.key(), m.value(), m.offset(), m.headers()))
for i, (k, v, o, h) in enumerate(got):
    assert k == b'k%d' % i and v == b'v%d' % i and o == i and h == [('h', b'x')], (i, k, v, o, h)
print('ok', len(got))
`
	if out := run(t, "", py, "-c", script, e.kafka); !strings.Contains(out, "ok 100") {
		t.Fatalf("python:\n%s", out)
	}
}

// TestKafkaJSIdempotent: kafkajs's idempotent producer (InitProducerId, sequences) writes
// every record once.
func TestKafkaJSIdempotent(t *testing.T) {
	mod := filepath.Join(repoRoot(t), ".tools", "node", "node_modules", "kafkajs")
	_, err := os.Stat(mod)
	_, nerr := exec.LookPath("node")
	need(t, "kafkajs (npm, under .tools/node)", err == nil && nerr == nil)
	e := start(t)
	e.createTopic(t, "js", 3)
	script := `
const { Kafka, logLevel } = require(process.argv[1]);
(async () => {
  const kafka = new Kafka({ brokers: [process.argv[2]], clientId: 'js', logLevel: logLevel.NOTHING });
  const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  for (let i = 0; i < 20; i++) {
    const msgs = [];
    for (let j = 0; j < 10; j++) msgs.push({ key: 'k' + (i * 10 + j), value: 'v' + (i * 10 + j) });
    await p.send({ topic: 'js', acks: -1, messages: msgs });
  }
  await p.disconnect();
  console.log('ok');
})().catch(e => { console.error(e); process.exit(1); });
`
	if out := run(t, "", "node", "-e", script, mod, e.kafka); !strings.Contains(out, "ok") {
		t.Fatalf("kafkajs:\n%s", out)
	}
	c := e.client(t, kgo.ConsumeTopics("js"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for n := 0; n < 200; {
		fs := c.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Key)]++
			n++
			if r.ProducerID <= 0 {
				t.Fatalf("record %q carries no producer id", r.Key)
			}
		})
	}
	if len(seen) != 200 {
		t.Fatalf("%d distinct keys, want 200", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("key %s written %d times", k, n)
		}
	}
}

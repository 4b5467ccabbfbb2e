package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// TestEncryptedNamespaceKafkaFetch, against the embedded local-kms: a keyed namespace's
// records read back through a cold node's Kafka listener; with the KMS key disabled the
// partition answers error 29 TOPIC_AUTHORIZATION_FAILED and no records; re-enabled, they
// read again.
func TestEncryptedNamespaceKafkaFetch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, mc, _, start := kafkaKMSNodes(ctx, t)
	w := start("kw-1")
	url := "http://" + w.Addr()
	// Without SASL every topic is a stream of namespace default: give default the key.
	a := do(t, "PUT", url+"/v1/namespaces/default/key", "application/json", `{"create":true}`, "")
	if a.status != 200 {
		t.Fatalf("attach: %d %s", a.status, a.body)
	}
	var arn string
	if ks, err := mc.ListNamespaceKeys(ctx); err != nil || len(ks) != 1 {
		t.Fatal(ks, err)
	} else {
		arn = ks[0].KeyARN
	}
	if a := do(t, "POST", url+"/v1/namespaces/default/streams", "application/json", `{"name":"t","partitions":1}`, ""); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", url+"/v1/namespaces/default/streams/t/records", "application/json", `{"records":[{"value":"k1"},{"value":"k2"}]}`, ""); a.status != 200 {
		t.Fatalf("produce: %d %s", a.status, a.body)
	}
	fetch := func(n *node.Node) (int16, int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 0, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, len(p.RecordBatches)
	}
	if code, n := fetch(start("kc-1")); code != 0 || n == 0 {
		t.Fatalf("cold kafka fetch: code %d, %d bytes", code, n)
	}
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	cold := start("kc-2")
	if code, n := fetch(cold); code != kerr.TopicAuthorizationFailed.Code || n != 0 {
		t.Fatalf("kafka fetch with the key disabled: code %d (%v), %d bytes; want 29 and nothing", code, kerr.ErrorForCode(code), n)
	}
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	if code, n := fetch(cold); code != 0 || n == 0 {
		t.Fatalf("kafka fetch after re-enabling: code %d, %d bytes", code, n)
	}
}

// kafkaKMSNodes is the setup of the Kafka encryption tests: the embedded local-kms, a
// sequencer, an in-memory bucket, and start, which starts a log node with a Kafka listener
// on them (closed at the test's end).
func kafkaKMSNodes(ctx context.Context, t *testing.T) (*kms.Client, meta.Client, *objstore.Mem, func(id string) *node.Node) {
	raw := localKMS(t)
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	return raw, mc, bucket, func(id string) *node.Node {
		n, err := node.Start(ctx, node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 5 * time.Millisecond, Logger: quiet(), KMS: raw, KMSAdmin: raw})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		return n
	}
}

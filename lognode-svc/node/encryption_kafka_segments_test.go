package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/segmenter"
)

// TestEncryptedNamespaceKafkaFetchSegments, against the embedded local-kms: a keyed
// namespace's partition, segmented (sealed pages under ns/<id>/seg/), reads back through a
// cold node's Kafka listener; with the KMS key disabled it answers error 29 and no
// records; re-enabled, it reads again.
func TestEncryptedNamespaceKafkaFetchSegments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, mc, bucket, start := kafkaKMSNodes(ctx, t)
	w := start("kw-1")
	url := "http://" + w.Addr()
	if a := do(t, "PUT", url+"/v1/namespaces/default/key", "application/json", `{"create":true}`, ""); a.status != 200 {
		t.Fatalf("attach: %d %s", a.status, a.body)
	}
	ks, err := mc.ListNamespaceKeys(ctx)
	if err != nil || len(ks) != 1 {
		t.Fatal(ks, err)
	}
	if a := do(t, "POST", url+"/v1/namespaces/default/streams", "application/json", `{"name":"t","partitions":1}`, ""); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	for range 3 {
		if a := do(t, "POST", url+"/v1/namespaces/default/streams/t/records", "application/json", `{"records":[{"value":"k1"},{"value":"k2"}]}`, ""); a.status != 200 {
			t.Fatalf("produce: %d %s", a.status, a.body)
		}
	}
	ring, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: raw, Bucket: bucket})
	cat, _ := envelope.NewCatalog(envelope.CatalogConfig{Meta: mc, Keyring: ring, Logger: quiet()})
	seg, err := segmenter.New(segmenter.Config{Bucket: bucket, Meta: mc, TargetBytes: segmenter.MinTargetBytes, MaxAge: time.Millisecond, Keys: cat, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	sts, _ := mc.ListStreams(ctx, meta.DefaultNS)
	es, _, err := mc.Lookup(ctx, sts[0].ID, 0, 0, 10)
	if err != nil || len(es) != 1 || es[0].Kind != meta.KindSegment || !strings.HasPrefix(es[0].Object, envelope.SegmentKey(ks[0].ID, "seg/")) {
		t.Fatalf("index %+v %v, want one sealed segment", es, err)
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
		t.Fatalf("cold kafka fetch from segments: code %d, %d bytes", code, n)
	}
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(ks[0].KeyARN)}); err != nil {
		t.Fatal(err)
	}
	cold := start("kc-2")
	if code, n := fetch(cold); code != kerr.TopicAuthorizationFailed.Code || n != 0 {
		t.Fatalf("kafka fetch from segments with the key disabled: code %d (%v), %d bytes; want 29 and nothing", code, kerr.ErrorForCode(code), n)
	}
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(ks[0].KeyARN)}); err != nil {
		t.Fatal(err)
	}
	if code, n := fetch(cold); code != 0 || n == 0 {
		t.Fatalf("kafka fetch after re-enabling: code %d, %d bytes", code, n)
	}
}

package e2e

import (
	"context"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestDevAuthKafkaSASL: `loam dev --auth` checks keys on its Kafka listener too. A client
// without SASL is refused before any request but ApiVersions; SASL/PLAIN and SCRAM-SHA-512
// with the bootstrap key produce and consume; a wrong key fails authentication.
func TestDevAuthKafkaSASL(t *testing.T) {
	const id = "0123456789abcdef01234567"
	const admin = "loam_" + id + "_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlYw"
	p := startDev(t, t.TempDir(), freePorts(t), []string{"LOAM_ADMIN_KEY=" + admin}, "--auth")
	banner, _ := os.ReadFile(p.logPath)
	m := regexp.MustCompile(`Kafka protocol +(127\.0\.0\.1:\d+) +\(plaintext, SASL`).FindSubmatch(banner)
	if m == nil {
		t.Fatalf("no Kafka listener with SASL in the banner:\n%s", banner)
	}
	addr := string(m[1])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	anon, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := kadm.NewClient(anon).CreateTopic(pctx, 1, 1, nil, "open"); err == nil {
		t.Fatal("a CreateTopics without SASL succeeded on a node that checks keys")
	}
	pcancel()

	for _, tc := range []struct {
		name string
		opt  kgo.Opt
	}{
		{"plain", kgo.SASL(plain.Auth{User: "default", Pass: admin}.AsMechanism())},
		{"scram-sha-512", kgo.SASL(scram.Auth{User: id, Pass: admin}.AsSha512Mechanism())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "sasl-" + tc.name
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), tc.opt,
				kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				t.Fatalf("create topic: %v", err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			fs := cl.PollRecords(ctx, 1)
			if err := fs.Err(); err != nil {
				t.Fatalf("consume: %v", err)
			}
			if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
				t.Fatalf("consumed %v", recs)
			}
		})
	}

	bad, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.SASL(scram.Auth{User: id, Pass: admin + "x"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong key: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

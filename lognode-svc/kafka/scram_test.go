package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
)

// TestSASLSCRAM: kgo logs in with SCRAM-SHA-256 and SCRAM-SHA-512, user name the key's id
// and password the key, against the verifiers stored when the key was created: a
// namespace key's topics are its namespace's, an admin key's the authzid's. A wrong key,
// and a key stored without verifiers (one created before they were), are refused
// SASL_AUTHENTICATION_FAILED, the latter naming SASL/PLAIN, which still logs it in.
func TestSASLSCRAM(t *testing.T) {
	var mc meta.Client
	e := start(t, func(c *node.Config) {
		mc = c.Meta
		c.Auth = auth.New(c.Meta, auth.Options{TTL: 100 * time.Millisecond})
	})
	bg := context.Background()
	for _, ns := range []string{"team", "ops"} {
		if err := mc.CreateNamespace(bg, ns); err != nil {
			t.Fatal(err)
		}
	}
	token, k, err := auth.NewKey(false, "team", "scram test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateKey(bg, k); err != nil {
		t.Fatal(err)
	}
	mechs := map[string]func(scram.Auth) sasl.Mechanism{
		auth.SCRAMSHA256: scram.Auth.AsSha256Mechanism,
		auth.SCRAMSHA512: scram.Auth.AsSha512Mechanism,
	}
	for name, mech := range mechs {
		topic := "events-" + strings.ToLower(name[len(name)-3:])
		opt := kgo.SASL(mech(scram.Auth{User: k.ID, Pass: token}))
		adm := e.admin(t, opt)
		if res, err := adm.CreateTopic(ctx(t), 1, 1, nil, topic); err != nil || res.Err != nil {
			t.Fatalf("%s: create: %v %v", name, err, res.Err)
		}
		if _, _, err := mc.GetStream(bg, "team", topic); err != nil {
			t.Fatalf("%s: the topic is not a stream of the key's namespace: %v", name, err)
		}
		p := e.client(t, opt, kgo.DefaultProduceTopic(topic))
		if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
		bad := e.client(t, kgo.SASL(mech(scram.Auth{User: k.ID, Pass: token + "x"})), kgo.RequestRetries(0))
		if _, err := bad.Request(ctx(t), kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: wrong key: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	admin, ak, err := auth.NewKey(true, "", "scram admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateKey(bg, ak); err != nil {
		t.Fatal(err)
	}
	adm := e.admin(t, kgo.SASL(scram.Auth{User: ak.ID, Pass: admin, Zid: "ops"}.AsSha512Mechanism()))
	if res, err := adm.CreateTopic(ctx(t), 1, 1, nil, "audit"); err != nil || res.Err != nil {
		t.Fatalf("admin create: %v %v", err, res.Err)
	}
	if _, _, err := mc.GetStream(bg, "ops", "audit"); err != nil {
		t.Fatalf("an admin key's topic is not in the authzid's namespace: %v", err)
	}

	// A key stored without verifiers.
	oldToken, old, err := auth.NewKey(false, "team", "before SCRAM")
	if err != nil {
		t.Fatal(err)
	}
	old.SCRAM = nil
	if _, err := mc.CreateKey(bg, old); err != nil {
		t.Fatal(err)
	}
	cl := e.client(t, kgo.SASL(scram.Auth{User: old.ID, Pass: oldToken}.AsSha256Mechanism()), kgo.RequestRetries(0))
	_, err = cl.Request(ctx(t), kmsg.NewPtrMetadataRequest())
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "SASL/PLAIN") {
		t.Fatalf("a key without verifiers: %v, want SASL_AUTHENTICATION_FAILED naming SASL/PLAIN", err)
	}
	plainOK := e.admin(t, kgo.SASL(plain.Auth{User: "anyone", Pass: oldToken}.AsMechanism()))
	if _, err := plainOK.ListTopics(ctx(t)); err != nil {
		t.Fatalf("the same key over PLAIN: %v", err)
	}
}

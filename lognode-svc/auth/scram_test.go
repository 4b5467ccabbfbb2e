package auth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
)

// TestSCRAMRFC7677: the server side of RFC 7677's SCRAM-SHA-256 example exchange, from a
// verifier made of its password and salt, answers its server-first and server-final
// messages byte for byte.
func TestSCRAMRFC7677(t *testing.T) {
	ctx := context.Background()
	m := metafake.New()
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	v, err := auth.SCRAMVerifierOf(auth.SCRAMSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateKey(ctx, meta.APIKey{ID: "user", Admin: true, Hash: meta.KeyHash("x"), SCRAM: []meta.SCRAMVerifier{v}}); err != nil {
		t.Fatal(err)
	}
	s, err := auth.New(m, auth.Options{}).NewSCRAM(auth.SCRAMSHA256)
	if err != nil {
		t.Fatal(err)
	}
	auth.SetSCRAMNonce(s, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	out, done, err := s.Step(ctx, []byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; err != nil || done || string(out) != want {
		t.Fatalf("server-first %q %v %v, want %q", out, done, err, want)
	}
	out, done, err = s.Step(ctx, []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; err != nil || !done || string(out) != want {
		t.Fatalf("server-final %q %v %v, want %q", out, done, err, want)
	}
	if s.Key().ID != "user" {
		t.Fatalf("authenticated %q", s.Key().ID)
	}
}

// exchange runs franz-go's SCRAM client against a SCRAMServer.
func exchange(t *testing.T, a *auth.Authenticator, mech, user, pass, zid string) (*auth.SCRAMServer, error) {
	t.Helper()
	ctx := context.Background()
	ca := scram.Auth{User: user, Pass: pass, Zid: zid}
	m := ca.AsSha256Mechanism()
	if mech == auth.SCRAMSHA512 {
		m = ca.AsSha512Mechanism()
	}
	sess, first, err := m.Authenticate(ctx, "node")
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.NewSCRAM(mech)
	if err != nil {
		t.Fatal(err)
	}
	msg := first
	for {
		out, done, err := s.Step(ctx, msg)
		if err != nil {
			return s, err
		}
		cdone, next, err := sess.Challenge(out)
		if err != nil {
			t.Fatalf("the client refused the server's message %q: %v", out, err)
		}
		if done {
			if !cdone {
				t.Fatal("the server finished before the client")
			}
			return s, nil
		}
		msg = next
	}
}

// TestSCRAMKeys: a key made by NewKey logs in with both mechanisms (user: its id,
// password: the key), against franz-go's client, which checks the server's signature. A
// wrong key, an unknown id, a revoked key and a key without verifiers are refused naming
// why.
func TestSCRAMKeys(t *testing.T) {
	ctx := context.Background()
	m := metafake.New()
	token, k, err := auth.NewKey(true, "", "scram")
	if err != nil {
		t.Fatal(err)
	}
	if len(k.SCRAM) != 2 || strings.Contains(string(k.SCRAM[0].StoredKey), token) {
		t.Fatalf("verifiers %+v", k.SCRAM)
	}
	if _, err := m.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	a := auth.New(m, auth.Options{})
	for _, mech := range auth.SCRAMMechanisms {
		s, err := exchange(t, a, mech, k.ID, token, "team")
		if err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
		if s.Key().ID != k.ID || s.AuthzID() != "team" {
			t.Fatalf("%s: key %q authzid %q", mech, s.Key().ID, s.AuthzID())
		}
		if _, err := exchange(t, a, mech, k.ID, token+"x", ""); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "proof does not match") {
			t.Fatalf("%s, wrong key: %v", mech, err)
		}
		if _, err := exchange(t, a, mech, "0123456789abcdef01234567", token, ""); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "unknown API key id") {
			t.Fatalf("%s, unknown id: %v", mech, err)
		}
	}
	old := meta.APIKey{ID: "00aa", Admin: true, Hash: meta.KeyHash("loam_00aa_old")}
	if _, err := m.CreateKey(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := exchange(t, a, auth.SCRAMSHA512, old.ID, "loam_00aa_old", ""); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "SASL/PLAIN") {
		t.Fatalf("a key without verifiers: %v, want a refusal naming SASL/PLAIN", err)
	}
	if err := m.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	fresh := auth.New(m, auth.Options{})
	if _, err := exchange(t, fresh, auth.SCRAMSHA256, k.ID, token, ""); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a revoked key: %v", err)
	}
}

// FuzzSCRAMServer feeds arbitrary client messages to both steps: no panic, and nothing
// but a real proof of the key authenticates.
func FuzzSCRAMServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("n,a=team,n=user,r=abc"), []byte("c=bixhPXRlYW0s,r=abc,p=AAAA"))
	f.Add([]byte("p=tls-unique,,n=user,r=x"), []byte(""))
	f.Add([]byte("n,,n=us=2Cer,r=x,ext=1"), []byte("c=biws,r=x,p="))
	ctx := context.Background()
	m := metafake.New()
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	v, _ := auth.SCRAMVerifierOf(auth.SCRAMSHA256, "pencil", salt, 4096)
	if _, err := m.CreateKey(ctx, meta.APIKey{ID: "user", Admin: true, Hash: meta.KeyHash("x"), SCRAM: []meta.SCRAMVerifier{v}}); err != nil {
		f.Fatal(err)
	}
	a := auth.New(m, auth.Options{})
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, err := a.NewSCRAM(auth.SCRAMSHA256)
		if err != nil {
			t.Fatal(err)
		}
		auth.SetSCRAMNonce(s, "srv")
		if _, done, err := s.Step(ctx, first); err != nil || done {
			return
		}
		_, done, err := s.Step(ctx, final)
		if done && err == nil && !strings.Contains(string(final), "p=") {
			t.Fatalf("authenticated without a proof: %q %q", first, final)
		}
	})
}

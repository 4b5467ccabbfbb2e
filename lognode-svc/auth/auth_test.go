package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
)

func TestParseBearer(t *testing.T) {
	token, _, err := auth.NewKey(true, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want string // "" : ErrUnauthenticated with this text in the message
		bad  string
	}{
		{in: "Bearer " + token, want: token},
		{in: "bearer " + token, want: token},
		{in: "BEARER   " + token, want: token},
		{in: "", bad: "no API key"},
		{in: "Basic dXNlcjpwYXNz", bad: "not of the Bearer scheme"},
		{in: "Bearer", bad: "not of the Bearer scheme"},
		{in: "Bearer ", bad: "empty API key"},
		{in: "Bearer abc", bad: `starts with "loam_"`},
		{in: "Bearer loam_", bad: "loam_<id>_<secret>"},
		{in: "Bearer loam_abc", bad: "loam_<id>_<secret>"},
		{in: "Bearer loam_XYZ_secret", bad: "not lower-case hex"},
		{in: "Bearer loam_ab_sec ret", bad: "not base64url"},
		{in: "Bearer loam_ab_" + strings.Repeat("a", 300), bad: "longer than 256"},
	} {
		got, err := auth.ParseBearer(c.in)
		if c.bad == "" {
			if err != nil || got != c.want {
				t.Errorf("ParseBearer(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("ParseBearer(%q) = %q, %v; want ErrUnauthenticated naming %q", c.in, got, err, c.bad)
		}
	}
}

// FuzzParseBearer: any header value is either a well-formed key, returned exactly, or
// ErrUnauthenticated; never a panic.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer ", "Bearer loam_00ff_abc-_", "bearer  loam_0_x", "Basic x", "Bearer loam__x",
		"Bearer loam_ab_\x00", "Bearer loam_" + strings.Repeat("f", 70) + "_x", "Bearer loam_ab_c\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := auth.ParseBearer(v)
		if err != nil {
			if !errors.Is(err, auth.ErrUnauthenticated) {
				t.Fatalf("ParseBearer(%q): %v is not ErrUnauthenticated", v, err)
			}
			return
		}
		if !strings.HasSuffix(v, tok) || auth.CheckKeyFormat(tok) != nil || len(tok) > 256 {
			t.Fatalf("ParseBearer(%q) = %q", v, tok)
		}
		for _, c := range []byte(tok) {
			if c <= ' ' || c >= 0x7f {
				t.Fatalf("ParseBearer(%q) = %q holds byte %#x", v, tok, c)
			}
		}
	})
}

func TestNewKeyIsStoredHashedOnly(t *testing.T) {
	token, k, err := auth.NewKey(false, "team", "ci")
	if err != nil {
		t.Fatal(err)
	}
	id, err := auth.KeyID(token)
	if err != nil || id != k.ID || k.Namespace != "team" || k.Admin {
		t.Fatalf("key %q: id %q (%v), record %+v", token, id, err, k)
	}
	if string(k.Hash) == token || strings.Contains(string(k.Hash), token[len(token)-20:]) || len(k.Hash) != 32 {
		t.Fatalf("record holds the secret: %x", k.Hash)
	}
	if err := meta.CheckKey(k); err != nil {
		t.Fatal(err)
	}
	other, _, _ := auth.NewKey(false, "team", "")
	if other == token {
		t.Fatal("two keys alike")
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countingMeta counts LookupKey calls.
type countingMeta struct {
	*metafake.Meta
	mu      sync.Mutex
	lookups int
	gate    chan struct{} // when set, each lookup waits for it
}

func (m *countingMeta) LookupKey(ctx context.Context, h []byte) (meta.APIKey, error) {
	m.mu.Lock()
	m.lookups++
	m.mu.Unlock()
	if m.gate != nil {
		<-m.gate
	}
	return m.Meta.LookupKey(ctx, h)
}

// TestConcurrentLookupsShareOne: requests with one key arriving together send one
// LookupKey, and a caller that goes away does not fail the others.
func TestConcurrentLookupsShareOne(t *testing.T) {
	ctx := context.Background()
	m := &countingMeta{Meta: metafake.New(), gate: make(chan struct{})}
	token, k, _ := auth.NewKey(false, meta.DefaultNS, "")
	if _, err := m.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	a := auth.New(m, auth.Options{})
	gone, cancel := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { _, err := a.Lookup(gone, token); first <- err }()
	for {
		m.mu.Lock()
		n := m.lookups
		m.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	errs := make(chan error, 20)
	for range 20 {
		go func() { _, err := a.Lookup(ctx, token); errs <- err }()
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	close(m.gate)
	<-first
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m.lookups != 1 {
		t.Fatalf("%d lookups, want 1", m.lookups)
	}
}

func TestCheckScopesAndRevocationAfterTTL(t *testing.T) {
	ctx := context.Background()
	m := &countingMeta{Meta: metafake.New()}
	clk := &clock{t: time.Unix(1000, 0)}
	a := auth.New(m, auth.Options{TTL: 2 * time.Second, Now: clk.now})
	nsKey, k, _ := auth.NewKey(false, meta.DefaultNS, "")
	if _, err := m.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	admin, ak, _ := auth.NewKey(true, "", "")
	if _, err := m.CreateKey(ctx, ak); err != nil {
		t.Fatal(err)
	}
	check := func(key string, s auth.Scope) error { _, err := a.Check(ctx, "Bearer "+key, s); return err }
	if err := check(nsKey, auth.Scope{Namespace: meta.DefaultNS}); err != nil {
		t.Fatal(err)
	}
	if err := check(nsKey, auth.Scope{}); err != nil {
		t.Fatal(err)
	}
	if err := check(nsKey, auth.Scope{Namespace: "other"}); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Fatalf("other namespace: %v", err)
	}
	if err := check(nsKey, auth.Scope{Admin: true}); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Fatalf("admin route: %v", err)
	}
	if err := check(admin, auth.Scope{Admin: true}); err != nil {
		t.Fatal(err)
	}
	if err := check(admin, auth.Scope{Namespace: "other"}); err != nil {
		t.Fatal(err)
	}
	unknown, _, _ := auth.NewKey(true, "", "")
	if err := check(unknown, auth.Scope{}); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("unknown key: %v", err)
	}
	if m.lookups != 3 {
		t.Fatalf("%d lookups, want 3 (one per key, then cached)", m.lookups)
	}
	// Revoked: still accepted from the cache until its entry is TTL old, then refused.
	if err := m.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	clk.add(1900 * time.Millisecond)
	if err := check(nsKey, auth.Scope{}); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	clk.add(100 * time.Millisecond)
	if err := check(nsKey, auth.Scope{}); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("after the TTL: %v", err)
	}
}

func TestCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	m := &countingMeta{Meta: metafake.New()}
	a := auth.New(m, auth.Options{MaxEntries: 4})
	for range 100 {
		k, _, _ := auth.NewKey(true, "", "")
		if _, err := a.Lookup(ctx, k); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	if n := auth.CacheLen(a); n > 4 {
		t.Fatalf("cache holds %d entries, bound 4", n)
	}
}

func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	m := metafake.New()
	key, err := auth.BootstrapNew(ctx, m)
	if err != nil || key == "" {
		t.Fatalf("first bootstrap: %q, %v", key, err)
	}
	if again, err := auth.BootstrapNew(ctx, m); err != nil || again != "" {
		t.Fatalf("second bootstrap made a key: %q, %v", again, err)
	}
	if err := auth.Bootstrap(ctx, m, key); err != nil {
		t.Fatalf("bootstrap of the stored key again: %v", err)
	}
	if err := auth.Bootstrap(ctx, m, "loam_ab_short"); err == nil || !strings.Contains(err.Error(), "at least 22") {
		t.Fatalf("short secret: %v", err)
	}
	if err := auth.Bootstrap(ctx, m, "not-a-key"); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("malformed: %v", err)
	}
	a := auth.New(m, auth.Options{})
	if _, err := a.Check(ctx, "Bearer "+key, auth.Scope{Admin: true}); err != nil {
		t.Fatal(err)
	}
}

// Package auth authenticates the API keys a log node's HTTP and gRPC APIs receive and
// decides what a key may do. It knows nothing of the transport: the HTTP middleware and
// the gRPC interceptors hand it the Authorization header's value and the scope a call
// needs.
//
// A key is the string "loam_<id>_<secret>": id is public (it names the key in listings
// and revocations), secret is 32 random bytes in unpadded base64url. The metastore keeps
// only the SHA-256 of the whole string (meta.KeyHash), so a key cannot be recovered from
// it; NewKey shows it once.
//
// Lookups are cached for Options.TTL (default 2 s), both found keys and unknown ones, in
// at most Options.MaxEntries entries (default 10,000; about 200 bytes each). A revoked
// key therefore stops working on every node within TTL of the revocation, with no
// message between nodes: each node looks the key up again once its entry expires, one
// lookup per key however many requests carry it.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Errors: a call is refused with one of them (wrapped with the reason).
var (
	// ErrUnauthenticated: no key, a malformed one, or a key the metastore does not hold
	// (unknown or revoked). HTTP 401, gRPC UNAUTHENTICATED.
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrPermissionDenied: a valid key whose scope does not cover the call. HTTP 403,
	// gRPC PERMISSION_DENIED.
	ErrPermissionDenied = errors.New("auth: permission denied")
)

// Key format.
const (
	KeyPrefix    = "loam_"
	idBytes      = 12
	secretBytes  = 32
	maxKeyLength = 256
)

// Scope is what a call needs.
type Scope struct {
	// Admin: only an admin key (namespace and key management).
	Admin bool
	// Namespace: a key of this namespace or an admin key. Empty with Admin false: any
	// valid key.
	Namespace string
}

// Options tune an Authenticator.
type Options struct {
	TTL        time.Duration // how long a lookup is trusted (default 2 s)
	MaxEntries int           // cache bound (default 10,000)
	Now        func() time.Time
}

// Keys is the part of meta.Client that stores keys.
type Keys interface {
	LookupKey(ctx context.Context, hash []byte) (meta.APIKey, error)
	CreateKey(ctx context.Context, k meta.APIKey) (meta.APIKey, error)
	ListKeys(ctx context.Context) ([]meta.APIKey, error)
}

// lookupTimeout bounds one LookupKey.
const lookupTimeout = 5 * time.Second

// Authenticator checks keys against the metastore, with a short cache.
type Authenticator struct {
	meta Keys
	opts Options

	mu    sync.Mutex
	cache map[[sha256.Size]byte]entry
	// inflight holds the lookups being made, so concurrent requests with one key whose
	// entry expired send one LookupKey, not one each.
	inflight map[[sha256.Size]byte]*lookup
}

type lookup struct {
	done chan struct{}
	e    entry
	err  error
}

type entry struct {
	key     meta.APIKey
	found   bool
	expires time.Time
}

// New returns an Authenticator over m.
func New(m Keys, opts Options) *Authenticator {
	if opts.TTL <= 0 {
		opts.TTL = 2 * time.Second
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Authenticator{meta: m, opts: opts, cache: map[[sha256.Size]byte]entry{}, inflight: map[[sha256.Size]byte]*lookup{}}
}

// TTL is how long a lookup is trusted: a revocation reaches every node within it.
func (a *Authenticator) TTL() time.Duration { return a.opts.TTL }

// Check authenticates the Authorization header value and authorizes scope. The error
// wraps ErrUnauthenticated or ErrPermissionDenied, or is the metastore's (the key could
// not be looked up: meta.ErrUnavailable and the like).
func (a *Authenticator) Check(ctx context.Context, authorization string, scope Scope) (meta.APIKey, error) {
	token, err := ParseBearer(authorization)
	if err != nil {
		return meta.APIKey{}, err
	}
	k, err := a.Lookup(ctx, token)
	if err != nil {
		return meta.APIKey{}, err
	}
	return k, Authorize(k, scope)
}

// Lookup finds the live key token is, from the cache while it is fresh.
func (a *Authenticator) Lookup(ctx context.Context, token string) (meta.APIKey, error) {
	if err := CheckKeyFormat(token); err != nil {
		return meta.APIKey{}, err
	}
	h := sha256.Sum256([]byte(token))
	e, err := a.entry(ctx, h, func(ctx context.Context) (meta.APIKey, error) { return a.meta.LookupKey(ctx, h[:]) },
		func(k meta.APIKey) bool { return subtle.ConstantTimeCompare(k.Hash, h[:]) == 1 })
	if err != nil {
		return meta.APIKey{}, err
	}
	switch {
	case !e.found:
		return meta.APIKey{}, fmt.Errorf("%w: unknown API key", ErrUnauthenticated)
	case e.key.Revoked():
		return meta.APIKey{}, fmt.Errorf("%w: API key %s was revoked", ErrUnauthenticated, e.key.ID)
	}
	return e.key, nil
}

// entry answers the cached lookup h while it is fresh, else looks it up with fetch (one
// lookup at a time per h; the others wait for it or for their ctx); a key found is the
// one sought when match says so.
func (a *Authenticator) entry(ctx context.Context, h [sha256.Size]byte, fetch func(context.Context) (meta.APIKey, error), match func(meta.APIKey) bool) (entry, error) {
	now := a.opts.Now()
	a.mu.Lock()
	if e, ok := a.cache[h]; ok && now.Before(e.expires) {
		a.mu.Unlock()
		return e, nil
	}
	if l, ok := a.inflight[h]; ok {
		a.mu.Unlock()
		select {
		case <-l.done:
			return l.e, l.err
		case <-ctx.Done():
			return entry{}, fmt.Errorf("auth: look up key: %w: %w", meta.ErrUnavailable, ctx.Err())
		}
	}
	l := &lookup{done: make(chan struct{})}
	a.inflight[h] = l
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.inflight, h)
		if l.err == nil {
			a.storeLocked(h, l.e, now)
		}
		a.mu.Unlock()
		close(l.done)
	}()
	// The lookup serves every waiter: a caller that goes away does not end it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
	defer cancel()
	k, err := fetch(lctx)
	switch {
	case err == nil:
		l.e = entry{key: k, found: match(k)}
	case errors.Is(err, meta.ErrKeyNotFound):
		l.e = entry{}
	default:
		l.err = fmt.Errorf("auth: look up key: %w", err)
		return entry{}, l.err
	}
	l.e.expires = now.Add(a.opts.TTL)
	return l.e, nil
}

// storeLocked caches e, first dropping expired entries when the cache is full, then any
// one. a.mu is held.
func (a *Authenticator) storeLocked(h [sha256.Size]byte, e entry, now time.Time) {
	if _, ok := a.cache[h]; !ok && len(a.cache) >= a.opts.MaxEntries {
		for k, old := range a.cache {
			if !now.Before(old.expires) {
				delete(a.cache, k)
			}
		}
		for k := range a.cache {
			if len(a.cache) < a.opts.MaxEntries {
				break
			}
			delete(a.cache, k)
		}
	}
	a.cache[h] = e
}

// Authorize reports whether key k may make a call of scope s.
func Authorize(k meta.APIKey, s Scope) error {
	switch {
	case k.Admin:
		return nil
	case s.Admin:
		return fmt.Errorf("%w: API key %s is a key of namespace %s; this needs an admin key", ErrPermissionDenied, k.ID, k.Namespace)
	case s.Namespace != "" && s.Namespace != k.Namespace:
		return fmt.Errorf("%w: API key %s is a key of namespace %s, not of %s", ErrPermissionDenied, k.ID, k.Namespace, s.Namespace)
	}
	return nil
}

// ParseBearer returns the key of an Authorization header value "Bearer <key>" (the
// scheme is case-insensitive). A missing header, another scheme or a malformed key is
// ErrUnauthenticated naming what is wrong.
func ParseBearer(v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("%w: no API key (send Authorization: Bearer <key>)", ErrUnauthenticated)
	}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: the Authorization header is not of the Bearer scheme", ErrUnauthenticated)
	}
	token = strings.TrimLeft(token, " ")
	if err := CheckKeyFormat(token); err != nil {
		return "", err
	}
	return token, nil
}

// CheckKeyFormat checks that token has the form of a key ("loam_<id>_<secret>").
func CheckKeyFormat(token string) error {
	if token == "" {
		return fmt.Errorf("%w: empty API key", ErrUnauthenticated)
	}
	if len(token) > maxKeyLength {
		return fmt.Errorf("%w: API key longer than %d bytes", ErrUnauthenticated, maxKeyLength)
	}
	if _, err := KeyID(token); err != nil {
		return err
	}
	return nil
}

// KeyID is the public id of key token.
func KeyID(token string) (string, error) {
	rest, ok := strings.CutPrefix(token, KeyPrefix)
	if !ok {
		return "", fmt.Errorf("%w: an API key starts with %q", ErrUnauthenticated, KeyPrefix)
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || id == "" || secret == "" {
		return "", fmt.Errorf("%w: an API key is %s<id>_<secret>", ErrUnauthenticated, KeyPrefix)
	}
	for _, c := range []byte(id) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", fmt.Errorf("%w: the API key's id is not lower-case hex", ErrUnauthenticated)
		}
	}
	if len(id) > meta.MaxKeyIDLength {
		return "", fmt.Errorf("%w: the API key's id is longer than %d characters", ErrUnauthenticated, meta.MaxKeyIDLength)
	}
	for _, c := range []byte(secret) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return "", fmt.Errorf("%w: the API key's secret is not base64url", ErrUnauthenticated)
		}
	}
	return id, nil
}

// NewKey makes a new key of scope (an admin key, or one of namespace ns): the key string,
// to show once, and its record to store (meta.Client.CreateKey).
func NewKey(admin bool, ns, description string) (string, meta.APIKey, error) {
	var b [idBytes + secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", meta.APIKey{}, fmt.Errorf("auth: new key: %w", err)
	}
	id := hex.EncodeToString(b[:idBytes])
	token := KeyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(b[idBytes:])
	k := meta.APIKey{ID: id, Admin: admin, Description: description, Hash: meta.KeyHash(token)}
	var err error
	if k.SCRAM, err = SCRAMVerifiers(token); err != nil {
		return "", meta.APIKey{}, err
	}
	if !admin {
		k.Namespace = ns
	}
	return token, k, nil
}

// Bootstrap makes sure the metastore holds admin key token (an operator's LOAM_ADMIN_KEY),
// storing it when it does not. Running it again, on any node, changes nothing.
func Bootstrap(ctx context.Context, m Keys, token string) error {
	if err := CheckKeyFormat(token); err != nil {
		return fmt.Errorf("auth: bootstrap admin key: %w", err)
	}
	id, _ := KeyID(token)
	if len(token)-len(KeyPrefix)-len(id)-1 < 22 {
		return fmt.Errorf("auth: bootstrap admin key: the secret must be at least 22 characters (128 bits)")
	}
	k := meta.APIKey{ID: id, Admin: true, Description: "bootstrap", Hash: meta.KeyHash(token)}
	var err error
	if k.SCRAM, err = SCRAMVerifiers(token); err != nil {
		return fmt.Errorf("auth: bootstrap admin key %s: %w", id, err)
	}
	_, err = m.CreateKey(ctx, k)
	if err != nil {
		return fmt.Errorf("auth: bootstrap admin key %s: %w", id, err)
	}
	return nil
}

// BootstrapNew stores a new admin key and returns it, when the metastore holds no live admin
// key; otherwise it returns "".
func BootstrapNew(ctx context.Context, m Keys) (string, error) {
	keys, err := m.ListKeys(ctx)
	if err != nil {
		return "", fmt.Errorf("auth: bootstrap: list keys: %w", err)
	}
	for _, k := range keys {
		if k.Admin && !k.Revoked() {
			return "", nil
		}
	}
	token, k, err := NewKey(true, "", "bootstrap")
	if err != nil {
		return "", err
	}
	if _, err := m.CreateKey(ctx, k); err != nil {
		return "", fmt.Errorf("auth: bootstrap admin key: %w", err)
	}
	return token, nil
}

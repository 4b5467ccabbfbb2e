package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/loamhq/loam/shared/meta"
)

// SCRAM (RFC 5802, RFC 7677) with an API key as the password and its id as the user name.
//
// When a key is created, NewKey stores one verifier per mechanism next to its hash: a
// random salt, the iteration count, StoredKey and ServerKey. They prove a client knows the
// key without the key being kept or sent. A key created before verifiers were stored has
// none: its SCRAM logins fail with a message naming SASL/PLAIN, which still works with it.

// SCRAM mechanisms, as SASL names them.
const (
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// SCRAM parameters of new verifiers.
const (
	SCRAMIterations = 4096 // RFC 7677's minimum
	scramSaltBytes  = 16
	// maxSCRAMMessage bounds one client message (user name, nonce, proof, extensions).
	maxSCRAMMessage = 1024
	// maxSCRAMIterations bounds the work a stored verifier may ask of a login.
	maxSCRAMIterations = 1 << 20
)

// SCRAMMechanisms are the mechanisms SCRAMVerifiers makes verifiers for.
var SCRAMMechanisms = []string{SCRAMSHA256, SCRAMSHA512}

func scramHash(mech string) func() hash.Hash {
	switch mech {
	case SCRAMSHA256:
		return sha256.New
	case SCRAMSHA512:
		return sha512.New
	}
	return nil
}

// SCRAMVerifiers makes the verifiers of key string token, one per mechanism, each with its
// own random salt.
func SCRAMVerifiers(token string) ([]meta.SCRAMVerifier, error) {
	out := make([]meta.SCRAMVerifier, 0, len(SCRAMMechanisms))
	for _, mech := range SCRAMMechanisms {
		salt := make([]byte, scramSaltBytes)
		if _, err := rand.Read(salt); err != nil {
			return nil, fmt.Errorf("auth: SCRAM salt: %w", err)
		}
		v, err := scramVerifier(mech, token, salt, SCRAMIterations)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func scramVerifier(mech, password string, salt []byte, iterations int) (meta.SCRAMVerifier, error) {
	h := scramHash(mech)
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return meta.SCRAMVerifier{}, fmt.Errorf("auth: %s verifier: %w", mech, err)
	}
	clientKey := hmacOf(h, salted, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return meta.SCRAMVerifier{Mechanism: mech, Salt: salt, Iterations: int32(iterations),
		StoredKey: stored.Sum(nil), ServerKey: hmacOf(h, salted, []byte("Server Key"))}, nil
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// KeysByID is a metastore client that also finds keys by id (the sequencer's clients do).
type KeysByID interface {
	LookupKeyByID(ctx context.Context, id string) (meta.APIKey, error)
}

// LookupID finds the live key of id, from the cache while it is fresh (entries by id are
// apart from those by hash and share the cache's bound).
func (a *Authenticator) LookupID(ctx context.Context, id string) (meta.APIKey, error) {
	byID, ok := a.meta.(KeysByID)
	if !ok {
		return meta.APIKey{}, fmt.Errorf("%w: this metastore cannot find keys by id, which SCRAM needs: use SASL/PLAIN", ErrUnauthenticated)
	}
	if id == "" || len(id) > meta.MaxKeyIDLength {
		return meta.APIKey{}, fmt.Errorf("%w: a SCRAM user name is an API key's id (1 to %d characters)", ErrUnauthenticated, meta.MaxKeyIDLength)
	}
	h := sha256.Sum256([]byte("id\x00" + id))
	e, err := a.entry(ctx, h, func(ctx context.Context) (meta.APIKey, error) { return byID.LookupKeyByID(ctx, id) },
		func(k meta.APIKey) bool { return k.ID == id })
	if err != nil {
		return meta.APIKey{}, err
	}
	switch {
	case !e.found:
		return meta.APIKey{}, fmt.Errorf("%w: unknown API key id %q", ErrUnauthenticated, id)
	case e.key.Revoked():
		return meta.APIKey{}, fmt.Errorf("%w: API key %s was revoked", ErrUnauthenticated, e.key.ID)
	}
	return e.key, nil
}

// SCRAMServer is the server side of one SCRAM exchange: Step takes the client-first
// message and answers the server-first, then takes the client-final and answers the
// server-final. Its error wraps ErrUnauthenticated when the login fails, or is the
// metastore's.
type SCRAMServer struct {
	a    *Authenticator
	mech string
	h    func() hash.Hash

	step        int
	gs2, authz  string
	clientBare  string
	serverFirst string
	nonce       string
	key         meta.APIKey
	v           meta.SCRAMVerifier
	snonce      string // the server's nonce part; "" draws a random one (tests set it)
}

// NewSCRAM starts a SCRAM exchange of mechanism mech (SCRAMSHA256 or SCRAMSHA512).
func (a *Authenticator) NewSCRAM(mech string) (*SCRAMServer, error) {
	h := scramHash(mech)
	if h == nil {
		return nil, fmt.Errorf("auth: SASL mechanism %q is not SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	return &SCRAMServer{a: a, mech: mech, h: h}, nil
}

// Key is the key authenticated (once Step answered done).
func (s *SCRAMServer) Key() meta.APIKey { return s.key }

// AuthzID is the authorization identity the client-first message named ("" when none).
func (s *SCRAMServer) AuthzID() string { return s.authz }

// Step takes the client's next message and answers the server's; done is set with the
// server-final message, once the client proved it holds the key.
func (s *SCRAMServer) Step(ctx context.Context, msg []byte) (out []byte, done bool, err error) {
	if len(msg) > maxSCRAMMessage {
		return nil, false, fmt.Errorf("%w: a SCRAM message of %d bytes (at most %d)", ErrUnauthenticated, len(msg), maxSCRAMMessage)
	}
	switch s.step {
	case 0:
		s.step++
		out, err := s.clientFirst(ctx, string(msg))
		return out, false, err
	case 1:
		s.step++
		out, err := s.clientFinal(string(msg))
		return out, err == nil, err
	}
	return nil, false, fmt.Errorf("%w: the SCRAM exchange is over", ErrUnauthenticated)
}

func (s *SCRAMServer) clientFirst(ctx context.Context, msg string) ([]byte, error) {
	// gs2-header: cbind-flag "," [authzid] ","; then client-first-message-bare.
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: SCRAM client-first message without a GS2 header", ErrUnauthenticated)
	}
	switch {
	case flag == "n" || flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, fmt.Errorf("%w: SCRAM channel binding is not served: use %s without -PLUS", ErrUnauthenticated, s.mech)
	default:
		return nil, fmt.Errorf("%w: SCRAM GS2 flag %q: want n or y", ErrUnauthenticated, flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: SCRAM client-first message without a GS2 header", ErrUnauthenticated)
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return nil, fmt.Errorf("%w: SCRAM authzid %q: want a=<name>", ErrUnauthenticated, authz)
		}
		if s.authz, ok = scramName(a); !ok {
			return nil, fmt.Errorf("%w: SCRAM authzid %q is badly escaped", ErrUnauthenticated, a)
		}
	}
	s.gs2 = msg[:len(msg)-len(bare)]
	s.clientBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: a SCRAM client-first message is n=<user>,r=<nonce>", ErrUnauthenticated)
	}
	if strings.HasPrefix(bare, "m=") {
		return nil, fmt.Errorf("%w: SCRAM mandatory extensions are not served", ErrUnauthenticated)
	}
	user, ok := scramName(attrs[0][2:])
	if !ok {
		return nil, fmt.Errorf("%w: SCRAM user name %q is badly escaped", ErrUnauthenticated, attrs[0][2:])
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return nil, fmt.Errorf("%w: SCRAM client nonce is empty", ErrUnauthenticated)
	}
	k, err := s.a.LookupID(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("%w (the SCRAM user name is the key's id: loam_<id>_<secret>)", err)
	}
	var found bool
	for _, v := range k.SCRAM {
		if v.Mechanism == s.mech {
			s.v, found = v, true
		}
	}
	switch {
	case !found:
		return nil, fmt.Errorf("%w: API key %s has no %s verifier (it was created before SCRAM verifiers were stored): authenticate with SASL/PLAIN, or create a new key", ErrUnauthenticated, k.ID, s.mech)
	case s.v.Iterations <= 0 || s.v.Iterations > maxSCRAMIterations || len(s.v.Salt) == 0 || len(s.v.StoredKey) != s.h().Size() || len(s.v.ServerKey) != s.h().Size():
		return nil, fmt.Errorf("%w: API key %s has a malformed %s verifier", ErrUnauthenticated, k.ID, s.mech)
	}
	s.key = k
	if s.snonce == "" {
		var sn [24]byte
		if _, err := rand.Read(sn[:]); err != nil {
			return nil, fmt.Errorf("auth: SCRAM nonce: %w", err)
		}
		s.snonce = base64.RawStdEncoding.EncodeToString(sn[:])
	}
	s.nonce = cnonce + s.snonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.v.Salt) + ",i=" + strconv.Itoa(int(s.v.Iterations))
	return []byte(s.serverFirst), nil
}

func (s *SCRAMServer) clientFinal(msg string) ([]byte, error) {
	without, proofAttr, ok := cutLast(msg, ",p=")
	if !ok {
		return nil, fmt.Errorf("%w: a SCRAM client-final message ends with p=<proof>", ErrUnauthenticated)
	}
	attrs := strings.Split(without, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: a SCRAM client-final message is c=<binding>,r=<nonce>,p=<proof>", ErrUnauthenticated)
	}
	cb, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cb) != s.gs2 {
		return nil, fmt.Errorf("%w: SCRAM channel binding does not repeat the GS2 header", ErrUnauthenticated)
	}
	if subtle.ConstantTimeCompare([]byte(attrs[1][2:]), []byte(s.nonce)) != 1 {
		return nil, fmt.Errorf("%w: SCRAM nonce does not match the server's", ErrUnauthenticated)
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr)
	if err != nil || len(proof) != s.h().Size() {
		return nil, fmt.Errorf("%w: SCRAM proof is not a base64 %s digest", ErrUnauthenticated, s.mech)
	}
	authMessage := []byte(s.clientBare + "," + s.serverFirst + "," + without)
	sig := hmacOf(s.h, s.v.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	stored := s.h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.v.StoredKey) != 1 {
		return nil, fmt.Errorf("%w: SCRAM proof does not match API key %s (the password is the whole key, loam_<id>_<secret>)", ErrUnauthenticated, s.key.ID)
	}
	if s.key.Revoked() {
		return nil, fmt.Errorf("%w: API key %s was revoked", ErrUnauthenticated, s.key.ID)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(s.h, s.v.ServerKey, authMessage))), nil
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// scramName decodes a saslname: "=2C" is ',' and "=3D" is '='; any other '=' is an error.
func scramName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

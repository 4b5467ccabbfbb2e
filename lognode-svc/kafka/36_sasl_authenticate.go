package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
)

// SaslAuthenticate: versions 0-2.
//
// Behaviour: after a PLAIN handshake, one message "authzid NUL user NUL password": the
// password is a Loam API key, checked as the HTTP and gRPC APIs check a bearer key. A
// namespace key's topics are its namespace's (the user name is not checked); an admin
// key's are the namespace its user name names ("default" when empty).
//
// After a SCRAM-SHA-256 or SCRAM-SHA-512 handshake, two rounds (RFC 5802): the user name
// is the key's id (the <id> of loam_<id>_<secret>), the password the whole key, checked
// against the verifiers stored when the key was created. An admin key's topics are the
// namespace the authzid names ("default" when none). A key created before verifiers were
// stored answers SASL_AUTHENTICATION_FAILED naming SASL/PLAIN.
//
// A wrong key answers SASL_AUTHENTICATION_FAILED with the reason; the client may start
// over with a new handshake.
//
// Ignored: nothing; SessionLifetimeMillis is 0 (no re-authentication).
const (
	saslAuthenticateMin = 0
	saslAuthenticateMax = 2
)

func (c *conn) saslAuthenticate(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.s.cfg.Auth == nil || c.authed || c.mech == "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = msg(errors.New("SaslAuthenticate needs a SaslHandshake first on a listener that checks API keys"))
		return resp, nil
	}
	if c.mech != "PLAIN" {
		return c.scramStep(ctx, req, resp), nil
	}
	ns, user, key, err := c.plain(ctx, req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		if !errors.Is(err, auth.ErrUnauthenticated) && !errors.Is(err, auth.ErrPermissionDenied) {
			resp.ErrorCode = kerr.RequestTimedOut.Code // the key could not be looked up
		}
		resp.ErrorMessage = msg(err)
		c.mech = "" // a failed attempt may start over
		return resp, nil
	}
	c.ns, c.user, c.key, c.authed = ns, user, key, true
	return resp, nil
}

// scramStep serves one SCRAM round: the first starts the exchange, the second ends it,
// authenticated or not.
func (c *conn) scramStep(ctx context.Context, req *kmsg.SASLAuthenticateRequest, resp *kmsg.SASLAuthenticateResponse) kmsg.Response {
	fail := func(err error) kmsg.Response {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		if !errors.Is(err, auth.ErrUnauthenticated) {
			resp.ErrorCode = kerr.RequestTimedOut.Code // the key could not be looked up
		}
		resp.ErrorMessage = msg(err)
		c.mech, c.scram = "", nil // a failed attempt may start over
		return resp
	}
	if c.scram == nil {
		s, err := c.s.cfg.Auth.NewSCRAM(c.mech)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", auth.ErrUnauthenticated, err))
		}
		c.scram = s
	}
	out, done, err := c.scram.Step(ctx, req.SASLAuthBytes)
	if err != nil {
		return fail(err)
	}
	resp.SASLAuthBytes = out
	if done {
		k := c.scram.Key()
		c.ns = k.Namespace
		if k.Admin {
			c.ns = meta.DefaultNS
			if z := c.scram.AuthzID(); z != "" {
				c.ns = z
			}
		}
		c.user, c.authed, c.scram = k.ID, true, nil
		c.key = "" // no key to forward: SCRAM never sends it
	}
	return resp
}

// plain checks a SASL/PLAIN message and answers the namespace it authenticates for.
func (c *conn) plain(ctx context.Context, msg []byte) (ns, user, key string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%w: a PLAIN message is authzid NUL user NUL password: %d fields sent", auth.ErrUnauthenticated, len(parts))
	}
	user, key = string(parts[1]), string(parts[2])
	k, err := c.s.cfg.Auth.Lookup(ctx, key)
	if err != nil {
		return "", "", "", err
	}
	if !k.Admin {
		return k.Namespace, user, key, nil
	}
	if user == "" {
		return meta.DefaultNS, user, key, nil
	}
	return user, user, key, nil
}

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
// key's are the namespace its user name names ("default" when empty). A wrong key
// answers SASL_AUTHENTICATION_FAILED with the reason, and the connection is closed after
// the answer, as brokers do.
//
// Ignored: nothing; SessionLifetimeMillis is 0 (no re-authentication).
const (
	saslAuthenticateMin = 0
	saslAuthenticateMax = 2
)

func (c *conn) saslAuthenticate(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.s.cfg.Auth == nil || c.authed || c.mech != "PLAIN" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = msg(errors.New("SaslAuthenticate needs a PLAIN SaslHandshake first on a listener that checks API keys"))
		return resp, nil
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

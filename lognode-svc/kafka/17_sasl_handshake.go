package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/auth"
)

// SaslHandshake: version 1 (v0's unframed tokens are not served).
//
// Behaviour: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are offered, only when the listener
// checks API keys (Config.Auth); a listener without authentication answers every mechanism
// UNSUPPORTED_SASL_MECHANISM with an empty list. A second handshake on an authenticated
// connection is refused ILLEGAL_SASL_STATE (re-authentication is not served).
const (
	saslHandshakeMin = 1
	saslHandshakeMax = 1
)

// mechanisms are the SASL mechanisms offered.
var mechanisms = []string{"PLAIN", auth.SCRAMSHA256, auth.SCRAMSHA512}

func (c *conn) saslHandshake(_ context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if c.s.cfg.Auth == nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, nil
	}
	resp.SupportedMechanisms = mechanisms
	switch {
	case c.authed || c.mech != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !slices.Contains(mechanisms, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		c.mech = req.Mechanism
	}
	return resp, nil
}

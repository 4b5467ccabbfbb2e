package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: version 1 (v0's unframed tokens are not served).
//
// Behaviour: PLAIN is the only mechanism offered, and only when the listener checks API
// keys (Config.Auth); a listener without authentication answers every mechanism
// UNSUPPORTED_SASL_MECHANISM with an empty list. A second handshake on an authenticated
// connection is refused ILLEGAL_SASL_STATE (re-authentication is not served).
const (
	saslHandshakeMin = 1
	saslHandshakeMax = 1
)

// mechanisms are the SASL mechanisms offered.
var mechanisms = []string{"PLAIN"}

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
	case req.Mechanism != "PLAIN":
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		c.mech = req.Mechanism
	}
	return resp, nil
}

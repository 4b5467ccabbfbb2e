package auth

import "github.com/loamhq/loam/shared/meta"

// SetSCRAMNonce fixes the server nonce of s (RFC test vectors).
func SetSCRAMNonce(s *SCRAMServer, n string) { s.snonce = n }

// SCRAMVerifierOf is scramVerifier.
func SCRAMVerifierOf(mech, password string, salt []byte, iterations int) (meta.SCRAMVerifier, error) {
	return scramVerifier(mech, password, salt, iterations)
}

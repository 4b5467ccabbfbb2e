// Package tlsconf builds the TLS configurations of Loam's listeners and of the calls its
// services make to each other, from PEM files that are reloaded when they change.
//
// # Basics
//
// A Source holds one certificate and key (what this side presents) and, optionally, a CA
// bundle (what this side trusts for its peers). Load reads them; ServerConfig and
// ClientConfig return *tls.Config values whose callbacks ask the Source for the current
// certificate and CA on every handshake, so replacing the files (a renewal, a rotated
// cluster CA) takes effect on the next connection without a restart. Connections already
// open keep the certificate they were made with.
//
// Service identity is mutual TLS with a cluster CA: the sequencer's ServerConfig (a Source
// with a CA) requires every caller to present a certificate that chains to that CA and is
// valid for client authentication, and the log nodes, functions and the other voters
// present one (ClientConfig of a Source with a certificate). Verification of the peer's
// certificate is done against the Source's current CA, so a rotated CA file applies too.
//
// # Reload
//
// On a handshake, when CheckInterval (default 1 s) has passed since the last check, the
// files are stat'ed; a changed modification time or size of any of them reloads all of
// them. A reload that fails (a half-written file, a key that does not match the
// certificate) keeps the previous certificate and CA, reports the error through the
// Logger, and is tried again at the next check. There is no goroutine: a Source needs no
// Close.
//
// # Caveats
//
// A client verifies the server's certificate against the host name it dialed (or
// Config.ServerName when set), so a certificate must name every address its service is
// dialed by (DNS names or IP addresses as subject alternative names), or every voter's
// certificate carries one shared name given as ServerName.
//
// GenerateDev writes a throwaway CA and a certificate for trying TLS locally (loam dev
// --tls and tests); its keys are written unencrypted into the directory given.
package tlsconf

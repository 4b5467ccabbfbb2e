package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrConfig: a Config that cannot work, or files that do not hold what it names.
var ErrConfig = errors.New("tlsconf: invalid configuration")

// ErrIdentity: the peer presented no certificate, or one the cluster CA did not issue.
var ErrIdentity = errors.New("tlsconf: peer identity refused")

// DefaultCheckInterval is how often, at most, a Source looks at its files for changes.
const DefaultCheckInterval = time.Second

// Config names the PEM files of one side of a connection.
type Config struct {
	CertFile string // this side's certificate chain (leaf first)
	KeyFile  string // its private key
	// CAFile holds the CA certificates peers are verified against. On a server it makes
	// a client certificate of that CA mandatory; on a client it replaces the system roots.
	CAFile string
	// ServerName, on a client, is the name the server's certificate must carry (default:
	// the host dialed).
	ServerName string
	// CheckInterval is how often, at most, the files are checked for changes (at a
	// handshake); 0: DefaultCheckInterval; negative: at every handshake.
	CheckInterval time.Duration
	Logger        *slog.Logger // reload failures (default slog.Default())
}

// Enabled reports whether c names any file.
func (c Config) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" }

// Validate reports a Config that cannot work: a certificate without its key or the reverse.
func (c Config) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%w: a certificate (%q) and its key (%q) go together", ErrConfig, c.CertFile, c.KeyFile)
	}
	return nil
}

// Source is a certificate, its key and a CA pool loaded from files, reloaded when the files
// change. It is safe for concurrent use.
type Source struct {
	cfg Config

	mu      sync.Mutex
	checked time.Time
	sigs    []fileSig // of CertFile, KeyFile, CAFile at the last load attempt
	cert    *tls.Certificate
	pool    *x509.CertPool
	loaded  time.Time // when cert and pool were last replaced
}

type fileSig struct {
	mod  time.Time
	size int64
}

// Load reads the files c names. It fails when a file is missing or does not parse, or when
// the key does not match the certificate; afterwards a reload failure keeps what was loaded.
func Load(c Config) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, fmt.Errorf("%w: no certificate, key or CA file named", ErrConfig)
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	s := &Source{cfg: c}
	sigs := s.stat()
	cert, pool, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cert, s.pool, s.sigs, s.checked, s.loaded = cert, pool, sigs, time.Now(), time.Now()
	return s, nil
}

// Config is the configuration s was loaded with.
func (s *Source) Config() Config { return s.cfg }

// HasCertificate reports whether s presents a certificate.
func (s *Source) HasCertificate() bool { return s.cfg.CertFile != "" }

// HasCA reports whether s verifies peers against its own CA.
func (s *Source) HasCA() bool { return s.cfg.CAFile != "" }

func (s *Source) files() []string { return []string{s.cfg.CertFile, s.cfg.KeyFile, s.cfg.CAFile} }

func (s *Source) stat() []fileSig {
	out := make([]fileSig, 3)
	for i, f := range s.files() {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			out[i] = fileSig{fi.ModTime(), fi.Size()}
		}
	}
	return out
}

// read loads the files as they are now.
func (s *Source) read() (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if s.cfg.CertFile != "" {
		c, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: certificate %s with key %s: %v", ErrConfig, s.cfg.CertFile, s.cfg.KeyFile, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if s.cfg.CAFile != "" {
		pem, err := os.ReadFile(s.cfg.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: CA file: %v", ErrConfig, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrConfig, s.cfg.CAFile)
		}
	}
	return cert, pool, nil
}

// current returns the certificate and pool, reloading them first when the files changed.
func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.cfg.CheckInterval > 0 && now.Sub(s.checked) < s.cfg.CheckInterval {
		return s.cert, s.pool
	}
	s.checked = now
	sigs := s.stat()
	if equalSigs(sigs, s.sigs) {
		return s.cert, s.pool
	}
	s.sigs = sigs
	cert, pool, err := s.read()
	if err != nil {
		// A renewal in progress (certificate written, key not yet) lands here: keep serving
		// the previous pair; the next change of either file tries again.
		s.cfg.Logger.Warn("tls: reload failed, keeping the previous certificate", "err", err)
		s.sigs = nil // retry at the next check even if the files do not change again
		return s.cert, s.pool
	}
	s.cert, s.pool, s.loaded = cert, pool, now
	s.cfg.Logger.Info("tls: certificate files reloaded", "cert", s.cfg.CertFile, "ca", s.cfg.CAFile)
	return s.cert, s.pool
}

func equalSigs(a, b []fileSig) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// Certificate is the certificate s presents now (nil when it has none).
func (s *Source) Certificate() *tls.Certificate {
	c, _ := s.current()
	return c
}

// ServerConfig is a server's TLS configuration: it serves s's current certificate and,
// when s has a CA, requires a client certificate that chains to it (ErrIdentity otherwise).
func (s *Source) ServerConfig() *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.Certificate(); c != nil {
				return c, nil
			}
			return nil, fmt.Errorf("%w: no server certificate configured", ErrConfig)
		},
	}
	if s.HasCA() {
		// The chain is verified in VerifyConnection against the current pool (ClientCAs
		// would freeze the pool of the moment the config was made).
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			_, pool := s.current()
			return verify(cs.PeerCertificates, pool, "", x509.ExtKeyUsageClientAuth)
		}
	}
	return cfg
}

// ClientConfig is a client's TLS configuration: it presents s's current certificate when
// the server asks for one, and verifies the server's against s's CA (the system roots when
// s has none), for Config.ServerName or the host dialed.
func (s *Source) ClientConfig() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.cfg.ServerName}
	if s.HasCertificate() {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.Certificate(), nil
		}
	}
	if s.HasCA() {
		// Standard verification would use a RootCAs pool fixed now; VerifyConnection checks
		// the same chain, name and usage against the pool current at the handshake.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			_, pool := s.current()
			return verify(cs.PeerCertificates, pool, cs.ServerName, x509.ExtKeyUsageServerAuth)
		}
	}
	return cfg
}

// PeerClientConfig is the TLS configuration one cluster member uses to call another found
// through the node registry (by address, not by name): it presents s's certificate and
// verifies that the peer's chains to s's CA, without a name check. s must have a CA.
func (s *Source) PeerClientConfig() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := s.Certificate(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		_, pool := s.current()
		if pool == nil {
			return fmt.Errorf("%w: no cluster CA to verify the peer against", ErrIdentity)
		}
		return verify(cs.PeerCertificates, pool, "", x509.ExtKeyUsageServerAuth)
	}
	return cfg
}

// verify checks that chain (leaf first) chains to pool, is valid for usage and, when name
// is not empty, names it.
func verify(chain []*x509.Certificate, pool *x509.CertPool, name string, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: no certificate presented (want one of the cluster CA)", ErrIdentity)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: name,
		KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("%w: certificate %q: %v", ErrIdentity, chain[0].Subject.CommonName, err)
	}
	return nil
}

// ClusterClient is the identity a service presents when it calls the sequencer: the
// cluster CA (which verifies the sequencer) and a certificate of it (which the sequencer
// verifies). All empty: nil, nil (plaintext). A CA without a certificate, or the reverse,
// is an error: the sequencer of a cluster with a CA refuses callers without one.
func ClusterClient(caFile, certFile, keyFile, serverName string) (*Source, error) {
	c := Config{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: serverName}
	if !c.Enabled() {
		return nil, nil
	}
	if caFile == "" || certFile == "" {
		return nil, fmt.Errorf("%w: the cluster identity needs the cluster CA (%q) and a certificate it issued (%q)", ErrConfig, caFile, certFile)
	}
	return Load(c)
}

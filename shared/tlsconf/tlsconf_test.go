package tlsconf

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve accepts TLS connections with cfg on loopback, answering each with "ok" after the
// handshake, until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err == nil {
					io.WriteString(c, "ok")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr and reads the answer; it returns the server's leaf.
func dial(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c) // a TLS 1.3 server refuses a client certificate after the client's handshake ended
	if err != nil {
		return "", err
	}
	if string(b) != "ok" {
		return "", errors.New("no answer")
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func serial(t *testing.T, certFile string) string {
	t.Helper()
	c, _, err := loadPair(certFile, strings.TrimSuffix(certFile, ".pem")+"-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// TestReload swaps the served certificate's files under a running listener: the next
// handshake gets the new certificate, without a restart. A half-swapped pair (new
// certificate, old key) keeps the previous certificate in service.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	a, err := GenerateDev(filepath.Join(dir, "a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateDev(filepath.Join(dir, "b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live")
	os.Mkdir(live, 0o700)
	cert, key := filepath.Join(live, "server.pem"), filepath.Join(live, "server-key.pem")
	copyFile(t, a.Cert, cert)
	copyFile(t, a.Key, key)
	src, err := Load(Config{CertFile: cert, KeyFile: key, CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, src.ServerConfig())
	trustA, _ := Load(Config{CAFile: a.CA})
	trustB, _ := Load(Config{CAFile: b.CA})

	got, err := dial(addr, trustA.ClientConfig())
	if err != nil || got != serial(t, a.Cert) {
		t.Fatalf("before the swap: serial %s, %v; want %s", got, err, serial(t, a.Cert))
	}
	// Half a renewal: the certificate is new, the key still the old one.
	copyFile(t, b.Cert, cert)
	if got, err := dial(addr, trustA.ClientConfig()); err != nil || got != serial(t, a.Cert) {
		t.Fatalf("with a mismatched pair: serial %s, %v; want the previous %s", got, err, serial(t, a.Cert))
	}
	copyFile(t, b.Key, key)
	got, err = dial(addr, trustB.ClientConfig())
	if err != nil || got != serial(t, b.Cert) {
		t.Fatalf("after the swap: serial %s, %v; want %s", got, err, serial(t, b.Cert))
	}
	if _, err := dial(addr, trustA.ClientConfig()); err == nil {
		t.Fatal("a client trusting only the old CA accepted the new certificate")
	}
}

// TestClusterIdentity: a server with a CA admits only clients presenting a certificate of
// that CA.
func TestClusterIdentity(t *testing.T) {
	dir := t.TempDir()
	cluster, err := GenerateDev(filepath.Join(dir, "cluster"), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := GenerateDev(filepath.Join(dir, "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Load(cluster.DevConfig())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv.ServerConfig())
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"cluster identity", Config{CertFile: cluster.ClientCert, KeyFile: cluster.ClientKey, CAFile: cluster.CA}, true},
		{"no certificate", Config{CAFile: cluster.CA}, false},
		{"certificate of another CA", Config{CertFile: other.ClientCert, KeyFile: other.ClientKey, CAFile: cluster.CA}, false},
	} {
		c, err := Load(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dial(addr, c.ClientConfig())
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	// The client checks the server too: the cluster's server is not "other"'s.
	c, _ := Load(Config{CertFile: cluster.ClientCert, KeyFile: cluster.ClientKey, CAFile: other.CA})
	if _, err := dial(addr, c.ClientConfig()); err == nil || !strings.Contains(err.Error(), "peer identity refused") {
		t.Errorf("server of another CA: err %v, want ErrIdentity", err)
	}
	// ServerName is checked against the certificate.
	c, _ = Load(Config{CertFile: cluster.ClientCert, KeyFile: cluster.ClientKey, CAFile: cluster.CA, ServerName: "elsewhere.example"})
	if _, err := dial(addr, c.ClientConfig()); err == nil {
		t.Error("a certificate not naming ServerName was accepted")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	f, err := GenerateDev(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"nothing", Config{}, "no certificate, key or CA"},
		{"cert without key", Config{CertFile: f.Cert}, "go together"},
		{"missing file", Config{CertFile: f.Cert, KeyFile: filepath.Join(dir, "nope.pem")}, "nope.pem"},
		{"key of another cert", Config{CertFile: f.Cert, KeyFile: f.ClientKey}, "does not match"},
		{"CA not PEM", Config{CAFile: f.Key}, "holds no PEM certificate"},
	} {
		_, err := Load(tc.cfg)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrConfig mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestGenerateDevKeepsCA: a second run on the same directory keeps the CA (clients keep
// trusting it) and reissues a service certificate that lacks a new host.
func TestGenerateDevKeepsCA(t *testing.T) {
	dir := t.TempDir()
	a, err := GenerateDev(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	caSerial, certSerial := serial(t, a.CA), serial(t, a.Cert)
	b, err := GenerateDev(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if serial(t, b.CA) != caSerial || serial(t, b.Cert) != certSerial {
		t.Fatal("an unchanged second run reissued certificates")
	}
	c, err := GenerateDev(dir, []string{"10.1.2.3", "loam.example"})
	if err != nil {
		t.Fatal(err)
	}
	if serial(t, c.CA) != caSerial || serial(t, c.Cert) == certSerial {
		t.Fatal("new hosts: want the same CA and a new service certificate")
	}
	cert, _, _ := loadPair(c.Cert, c.Key)
	if len(cert.IPAddresses) != 3 || len(cert.DNSNames) != 2 {
		t.Fatalf("SANs %v %v", cert.IPAddresses, cert.DNSNames)
	}
}

// BenchmarkMutualHandshake is the cost of one new mutual-TLS connection (ECDSA P-256,
// TLS 1.3, both chains verified against the Source's CA) on loopback.
func BenchmarkMutualHandshake(b *testing.B) {
	f, err := GenerateDev(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := Load(f.DevConfig())
	cli, _ := Load(Config{CertFile: f.ClientCert, KeyFile: f.ClientKey, CAFile: f.CA})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv.ServerConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); io.WriteString(c, "ok"); c.Close() }()
		}
	}()
	cfg := cli.ClientConfig()
	b.ResetTimer()
	for b.Loop() {
		if _, err := dial(ln.Addr().String(), cfg); err != nil {
			b.Fatal(err)
		}
	}
}

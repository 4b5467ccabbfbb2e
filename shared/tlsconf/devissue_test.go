package tlsconf

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

func TestDevIssue(t *testing.T) {
	dir := t.TempDir()
	f, err := GenerateDev(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "seq-1.pem"), filepath.Join(dir, "seq-1-key.pem")
	if err := f.Issue(cert, key, "loam dev seq-1", []string{"10.1.2.3", "box"}); err != nil {
		t.Fatal(err)
	}
	ca, _, err := loadPair(f.CA, f.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := loadPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, host := range []string{"10.1.2.3", "box", "127.0.0.1", "localhost"} {
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("usage %v host %s: %v", usage, host, err)
			}
		}
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, %v", st.Mode(), err)
	}
	// A usable pair is kept; one for other hosts, or another name, is issued again.
	before, _ := os.ReadFile(cert)
	if err := f.Issue(cert, key, "loam dev seq-1", []string{"box"}); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(cert); !bytes.Equal(now, before) {
		t.Error("a usable certificate was issued again")
	}
	if err := f.Issue(cert, key, "loam dev seq-1", []string{"other"}); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(cert); bytes.Equal(now, before) {
		t.Error("a certificate lacking a host was kept")
	}
	// Without the CA: a clear error naming it.
	bad := DevFiles{CA: filepath.Join(dir, "nope.pem"), CAKey: filepath.Join(dir, "nope-key.pem")}
	if err := bad.Issue(cert, key, "x", nil); err == nil || !bytes.Contains([]byte(err.Error()), []byte("nope.pem")) {
		t.Errorf("Issue without a CA = %v", err)
	}
}

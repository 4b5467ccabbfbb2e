package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// DevFiles are the files GenerateDev writes into its directory.
type DevFiles struct {
	CA, CAKey string // the CA certificate (what clients trust: curl --cacert) and its key
	// Cert and Key are the services' certificate: the listeners serve it and the log node
	// and sequencer present it to each other (it is valid for server and client auth).
	Cert, Key string
	// ClientCert and ClientKey are a cluster identity for tools that call the sequencer
	// (sequencer-svc members, grpcurl -cert -key).
	ClientCert, ClientKey string
}

// DevConfig is the Config of a service using the generated files.
func (f DevFiles) DevConfig() Config { return Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA} }

// devValidity is how long generated certificates are valid.
const devValidity = 397 * 24 * time.Hour

// GenerateDev makes sure dir holds a local CA and certificates it issued for hosts (DNS
// names or IP addresses; localhost, 127.0.0.1 and ::1 are always added). A CA already
// there is kept, so clients that trust it keep working across restarts; the service and
// client certificates are issued again when missing, unreadable, expiring within a day,
// not issued by that CA, or not naming every host. Keys are ECDSA P-256, written 0600.
func GenerateDev(dir string, hosts []string) (DevFiles, error) {
	f := DevFiles{
		CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"),
		Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("tlsconf: dev certificates: %w", err)
	}
	hosts = append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	ca, caKey, err := loadPair(f.CA, f.CAKey)
	if err != nil {
		if ca, caKey, err = issue(nil, nil, "Loam dev CA", nil, true); err != nil {
			return f, err
		}
		if err := writePair(f.CA, f.CAKey, ca, caKey); err != nil {
			return f, err
		}
	}
	for _, leaf := range []struct {
		cert, key, cn string
		hosts         []string
	}{{f.Cert, f.Key, "loam dev service", hosts}, {f.ClientCert, f.ClientKey, "loam dev client", nil}} {
		if c, _, err := loadPair(leaf.cert, leaf.key); err == nil && usable(c, ca, leaf.hosts) {
			continue
		}
		c, k, err := issue(ca, caKey, leaf.cn, leaf.hosts, false)
		if err != nil {
			return f, err
		}
		if err := writePair(leaf.cert, leaf.key, c, k); err != nil {
			return f, err
		}
	}
	return f, nil
}

// usable reports whether c was issued by ca, is valid for another day and names hosts.
func usable(c, ca *x509.Certificate, hosts []string) bool {
	if c.CheckSignatureFrom(ca) != nil || time.Until(c.NotAfter) < 24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(c.DNSNames, h) {
			return false
		}
	}
	return true
}

// issue makes a certificate: a self-signed CA when isCA, else a leaf signed by parent
// valid for server and client authentication.
func issue(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, hosts []string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Loam dev"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(devValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
		tmpl.ExtKeyUsage = nil
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: create certificate %q: %w", cn, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: parse certificate %q: %w", cn, err)
	}
	return c, key, nil
}

func writePair(certFile, keyFile string, c *x509.Certificate, k *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return fmt.Errorf("tlsconf: marshal key: %w", err)
	}
	// The key first, the certificate second, each replaced by rename: a Source that reloads
	// in between sees a mismatched pair, keeps the old one and retries.
	if err := writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644)
}

func writeFile(name string, b []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("tlsconf: write %s: %w", name, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("tlsconf: write %s: %w", name, err)
	}
	return nil
}

// loadPair reads a certificate and its ECDSA key.
func loadPair(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, errors.New("tlsconf: not PEM")
	}
	c, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParseECPrivateKey(kp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !k.PublicKey.Equal(c.PublicKey) {
		return nil, nil, errors.New("tlsconf: key does not match certificate")
	}
	return c, k, nil
}

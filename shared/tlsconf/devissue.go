package tlsconf

import "fmt"

// Issue makes sure certFile and keyFile hold a certificate of f's CA named cn, for hosts
// (localhost, 127.0.0.1 and ::1 are always added), valid for server and client auth: one
// process's own certificate when several share the CA (the supervised `loam dev --tls`
// gives each child its own). A usable pair already there is kept, as GenerateDev keeps
// its own. The key is ECDSA P-256, written 0600.
func (f DevFiles) Issue(certFile, keyFile, cn string, hosts []string) error {
	ca, caKey, err := loadPair(f.CA, f.CAKey)
	if err != nil {
		return fmt.Errorf("tlsconf: dev CA %s: %w", f.CA, err)
	}
	hosts = append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	if c, _, err := loadPair(certFile, keyFile); err == nil && usable(c, ca, hosts) && c.Subject.CommonName == cn {
		return nil
	}
	c, k, err := issue(ca, caKey, cn, hosts, false)
	if err != nil {
		return err
	}
	return writePair(certFile, keyFile, c, k)
}

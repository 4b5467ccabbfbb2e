package coord_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/coord/coordtest"
)

// TestHTTPSClient runs the conformance suite over HTTPS with the client NewHTTPClient takes.
func TestHTTPSClient(t *testing.T) {
	coordtest.Run(t, func(t *testing.T, opts ...coord.Option) coord.Store {
		t.Helper()
		b, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"), opts...)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewTLSServer(coord.Handler(b))
		t.Cleanup(func() { srv.Close(); b.Close() })
		// NewHTTP's own client does not trust the test server's certificate.
		if _, err := coord.NewHTTP(srv.URL, opts...).Get(t.Context(), "p", "s"); err == nil {
			t.Fatal("an untrusted certificate was accepted")
		}
		return coord.NewHTTPClient(srv.URL, srv.Client(), opts...)
	})
}

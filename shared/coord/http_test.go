package coord_test

import (
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/coord/coordtest"
)

func newHTTP(t *testing.T, opts ...coord.Option) coord.Store {
	t.Helper()
	b, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(coord.Handler(b))
	t.Cleanup(func() { srv.Close(); b.Close() })
	return coord.NewHTTP(srv.URL, opts...)
}

// TestHTTP runs the conformance suite through the HTTP client and server, over Bolt.
func TestHTTP(t *testing.T) {
	coordtest.Run(t, newHTTP)
}

func TestHTTPCleanPoints(t *testing.T) {
	coordtest.RunCleanPoints(t, newHTTP)
}

func TestHTTPUnreachable(t *testing.T) {
	s := coord.NewHTTP("http://127.0.0.1:1")
	_, err := s.Get(t.Context(), "p", "s")
	if err == nil || errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("unreachable server: %v (must not look like a missing item)", err)
	}
}

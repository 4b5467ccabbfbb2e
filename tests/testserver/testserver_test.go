package testserver

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Skip and Fatal record the message instead of ending the
// test.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper()             {}
func (r *recorder) Skip(args ...any)    { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any)   { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Logf(string, ...any) {}

func TestMissingBinarySkipsOrFails(t *testing.T) {
	t.Setenv("LOAM_REQUIRE_SERVERS", "")
	r := &recorder{TB: t}
	lookBinary(r, "no-such-loam-server", "install it")
	if !strings.Contains(r.skipped, "no-such-loam-server not found") || !strings.Contains(r.skipped, "install it") || r.fatal != "" {
		t.Errorf("without LOAM_REQUIRE_SERVERS: skipped %q, fatal %q; want a skip naming the binary and the hint", r.skipped, r.fatal)
	}
	t.Setenv("LOAM_REQUIRE_SERVERS", "1")
	r = &recorder{TB: t}
	lookBinary(r, "no-such-loam-server", "install it")
	if !strings.Contains(r.fatal, "no-such-loam-server not found") || r.skipped != "" {
		t.Errorf("with LOAM_REQUIRE_SERVERS=1: skipped %q, fatal %q; want a failure", r.skipped, r.fatal)
	}
}

func TestRepoRoot(t *testing.T) {
	root := repoRoot()
	if root == "" || !fileExists(filepath.Join(root, "tests", "testserver", "testserver.go")) {
		t.Fatalf("repoRoot() = %q, not the loam repository", root)
	}
}

// TestServersStartAndStop starts each server in a subtest, checks it answers, and checks
// that it is gone once the subtest's cleanup has run.
func TestServersStartAndStop(t *testing.T) {
	for name, startFn := range map[string]func(t *testing.T) string{
		"versitygw": func(t *testing.T) string { return StartVersityGW(t).URL },
		"moto":      func(t *testing.T) string { return StartMoto(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var url string
			t.Run("run", func(t *testing.T) {
				url = startFn(t)
				resp, err := http.Get(url + "/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if !strings.HasPrefix(url, "http://127.0.0.1:") {
					t.Errorf("url = %q, want a 127.0.0.1 address", url)
				}
			})
			if url == "" {
				t.Skip("server did not start")
			}
			conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
			if err == nil {
				conn.Close()
				t.Errorf("%s still accepts connections at %s after cleanup", name, url)
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// TestDevAuth runs `loam dev --auth` and drives the real CLI: the bootstrap admin key
// printed once, namespace and key administration, a namespace key confined to its
// namespace, revocation, and a restart that keeps the keys and prints no new one.
func TestDevAuth(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t)
	p := startDev(t, dir, ports, nil, "--auth")
	banner, _ := os.ReadFile(p.logPath)
	m := regexp.MustCompile(`bootstrap admin key, shown once: (loam_[0-9a-f]+_[A-Za-z0-9_-]+)`).FindSubmatch(banner)
	if m == nil {
		t.Fatalf("no bootstrap key in the banner:\n%s", banner)
	}
	admin := string(m[1])
	loam := func(key, stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(loamBin, append([]string{"--server", p.http}, args...)...)
		cmd.Env = append(os.Environ(), "LOAM_API_KEY="+key)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(key, stdin string, args ...string) string {
		t.Helper()
		out, err := loam(key, stdin, args...)
		if err != nil {
			t.Fatalf("loam %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(key, want string, args ...string) {
		t.Helper()
		out, err := loam(key, "", args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("loam %s: %v\n%s\nwant a failure naming %q", strings.Join(args, " "), err, out, want)
		}
	}
	fails("", "unauthorized", "stream", "list")
	fails("loam_00_bogus", "unauthorized", "stream", "list")
	must(admin, "", "namespace", "create", "team")
	if out := must(admin, "", "namespace", "list"); !strings.Contains(out, "team") || !strings.Contains(out, "default") {
		t.Fatalf("namespace list:\n%s", out)
	}
	var k streamapi.CreatedKey
	if err := json.Unmarshal([]byte(must(admin, "", "key", "create", "--scope-namespace", "team", "--json")), &k); err != nil || k.Key == "" {
		t.Fatalf("key create: %+v %v", k, err)
	}
	// The namespace key works in its namespace (--api-key beats LOAM_API_KEY) ...
	must("", "", "--api-key", k.Key, "--namespace", "team", "stream", "create", "s")
	must(k.Key, "a\nb\n", "--namespace", "team", "produce", "s", "-q")
	if out := must(k.Key, "", "--namespace", "team", "consume", "s"); out != "a\nb\n" {
		t.Fatalf("consume: %q", out)
	}
	// ... and nowhere else.
	fails(k.Key, "permission_denied", "stream", "list")
	fails(k.Key, "permission_denied", "namespace", "list")
	fails(k.Key, "permission_denied", "key", "list")
	fails(admin, "namespace_not_empty", "namespace", "delete", "team")
	list := must(admin, "", "key", "list")
	if !strings.Contains(list, k.ID) || strings.Contains(list, k.Key) || strings.Contains(list, admin) {
		t.Fatalf("key list:\n%s", list)
	}
	must(admin, "", "key", "revoke", k.ID)
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := loam(k.Key, "", "--namespace", "team", "stream", "list")
		if err != nil && strings.Contains(out, "unauthorized") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked key still works:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A restart keeps the keys and makes no new bootstrap key.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.stop(ctx); err != nil {
		t.Fatal(err)
	}
	p = startDev(t, dir, ports, nil, "--auth")
	if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), "shown once") {
		t.Fatalf("restart printed a new bootstrap key:\n%s", b)
	}
	must(admin, "", "--namespace", "team", "stream", "list")
	fails(k.Key, "unauthorized", "--namespace", "team", "stream", "list")
}

// TestDevAuthAdminKeyFromEnv: LOAM_ADMIN_KEY is the bootstrap admin key; nothing is printed.
func TestDevAuthAdminKeyFromEnv(t *testing.T) {
	const admin = "loam_0123456789abcdef01234567_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlYw"
	p := startDev(t, t.TempDir(), freePorts(t), []string{"LOAM_ADMIN_KEY=" + admin}, "--auth")
	if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), "shown once") {
		t.Fatalf("printed a key though LOAM_ADMIN_KEY was given:\n%s", b)
	}
	c, err := streamapi.NewClient(p.http, streamapi.WithAPIKey(admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.ListNamespaces(ctx); err != nil {
		t.Fatal(err)
	}
	anon, _ := streamapi.NewClient(p.http)
	if _, err := anon.ListStreams(ctx, "default"); streamapi.ErrorCode(err) != streamapi.CodeUnauthorized {
		t.Fatalf("without a key: %v", err)
	}
}

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/tlsconf"
)

// TestDevTLS runs the real `loam dev --tls`: it serves HTTPS and gRPC over TLS with the
// CA it generated in its data dir and prints how to trust it; the loam CLI works with
// --ca-cert (LOAM_CA_CERT) and an https:// server and fails without; grpcurl lists the
// services with -cacert; the sequencer port refuses a caller without the cluster identity
// and serves the generated client certificate.
func TestDevTLS(t *testing.T) {
	dataDir := t.TempDir()
	ports := freePorts(t)
	gports := freePorts(t)
	args := []string{"dev", "--tls", "--data-dir", dataDir,
		"--http-port", fmt.Sprint(ports.http), "--sequencer-port", fmt.Sprint(ports.rpc), "--raft-port", fmt.Sprint(ports.raft),
		"--kafka-port", "0", "--grpc-port", fmt.Sprint(gports.http), "--otlp-http-port", "0", "--otlp-grpc-port", "0", "--log-level", "warn"}
	cmd := exec.Command(loamBin, args...)
	logPath := filepath.Join(t.TempDir(), "loam-dev.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	logs := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	ca := filepath.Join(dataDir, "tls", "ca.pem")
	server := fmt.Sprintf("https://127.0.0.1:%d", ports.http)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("loam dev --tls exited during start-up:\n%s", logs())
		default:
		}
		if pem, err := os.ReadFile(ca); err == nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			if resp, err := hc.Get(server + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 && strings.Contains(logs(), "export LOAM_CA_CERT=") {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("loam dev --tls not healthy over HTTPS after 60s:\n%s", logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"https://127.0.0.1:", "curl --cacert " + ca, "grpcurl -cacert " + ca} {
		if !strings.Contains(logs(), want) {
			t.Errorf("banner lacks %q:\n%s", want, logs())
		}
	}

	loam := func(env []string, stdin string, args ...string) (string, error) {
		cmd := exec.Command(loamBin, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := loam(nil, "", "--server", server, "--ca-cert", ca, "stream", "create", "tls", "--partitions", "1"); err != nil {
		t.Fatalf("stream create with --ca-cert: %v\n%s", err, out)
	}
	env := []string{"LOAM_SERVER=" + server, "LOAM_CA_CERT=" + ca}
	if out, err := loam(env, "{\"n\":1}\nsecond\n", "produce", "tls", "-q"); err != nil {
		t.Fatalf("produce with LOAM_CA_CERT: %v\n%s", err, out)
	}
	out, err := loam(env, "", "consume", "tls")
	if err != nil || out != "{\"n\":1}\nsecond\n" {
		t.Fatalf("consume over TLS: %v\n%q", err, out)
	}
	out, err = loam(nil, "", "--server", server, "stream", "list")
	if err == nil || !strings.Contains(out, "certificate") {
		t.Fatalf("without --ca-cert: %v\n%s; want a certificate error", err, out)
	}
	out, err = loam(nil, "", "--server", strings.Replace(server, "https", "http", 1), "--ca-cert", ca, "stream", "list")
	if err == nil || !strings.Contains(out, "not https://") {
		t.Fatalf("--ca-cert with http://: %v\n%s", err, out)
	}

	if bin := findGrpcurl(); bin != "" {
		grpcAddr := fmt.Sprintf("127.0.0.1:%d", gports.http)
		out, err := exec.Command(bin, "-cacert", ca, grpcAddr, "list").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "loam.v1.RecordService\n") {
			t.Errorf("grpcurl -cacert list: %v\n%s", err, out)
		}
	} else if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
		t.Error("grpcurl not found on PATH or in .tools/bin [LOAM_REQUIRE_SERVERS=1]")
	}

	// The sequencer port: TLS without a client certificate is refused, the generated
	// client certificate is served.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seq := []string{fmt.Sprintf("127.0.0.1:%d", ports.rpc)}
	anon, err := tlsconf.Load(tlsconf.Config{CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := metagrpc.Dial(ctx, seq, metagrpc.WithTransportCredentials(anon.ClientCredentials()), metagrpc.WithAttempts(2))
	if _, err := c.ListNamespaces(ctx); !errors.Is(err, meta.ErrUnavailable) {
		t.Errorf("sequencer without the cluster identity: %v, want refused", err)
	}
	c.Close()
	dir := filepath.Join(dataDir, "tls")
	id, err := tlsconf.ClusterClient(ca, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"), "")
	if err != nil {
		t.Fatal(err)
	}
	c, _ = metagrpc.Dial(ctx, seq, metagrpc.WithTransportCredentials(id.ClientCredentials()))
	defer c.Close()
	if ns, err := c.ListNamespaces(ctx); err != nil || len(ns) == 0 {
		t.Errorf("sequencer with the cluster identity: %v, %v", ns, err)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("loam dev --tls did not stop on SIGTERM")
	}
}

// findGrpcurl is grpcurl on PATH or in <repo>/.tools/bin, or "".
func findGrpcurl() string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	p := filepath.Join(repoRoot(), ".tools", "bin", "grpcurl")
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// tlsFixture is a log node serving TLS from certificate files in a directory the test
// may swap, and two CAs: the one the node's files were issued by at start (a) and another (b).
type tlsFixture struct {
	n         *node.Node
	cert, key string
	a, b      tlsconf.DevFiles
	trustA    *tls.Config
	trustB    *tls.Config
}

func install(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}

func trust(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool}
}

func startTLSNode(t *testing.T) *tlsFixture {
	t.Helper()
	dir := t.TempDir()
	f := &tlsFixture{cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node-key.pem")}
	var err error
	if f.a, err = tlsconf.GenerateDev(filepath.Join(dir, "a"), nil); err != nil {
		t.Fatal(err)
	}
	if f.b, err = tlsconf.GenerateDev(filepath.Join(dir, "b"), nil); err != nil {
		t.Fatal(err)
	}
	install(t, f.a.Cert, f.cert)
	install(t, f.a.Key, f.key)
	src, err := tlsconf.Load(tlsconf.Config{CertFile: f.cert, KeyFile: f.key, CheckInterval: -1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	f.n, err = node.Start(context.Background(), node.Config{NodeID: "n-1", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: startSequencer(t), FlushInterval: 5 * time.Millisecond, Logger: quiet(), TLS: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.n.Close(context.Background()) })
	f.trustA, f.trustB = trust(t, f.a.CA), trust(t, f.b.CA)
	return f
}

// httpsGet fetches /healthz over a fresh connection trusting cfg; it returns the serial
// of the certificate the node served.
func httpsGet(url string, cfg *tls.Config) (string, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url + "/healthz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", &http.ProtocolError{ErrorString: resp.Status}
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
}

// grpcHealth calls grpc.health.v1.Health/Check over a fresh TLS connection trusting cfg.
func grpcHealth(addr string, cfg *tls.Config) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func leafSerial(t *testing.T, certFile string) string {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, strings.Replace(certFile, ".pem", "-key.pem", 1))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := x509.ParseCertificate(c.Certificate[0])
	return x.SerialNumber.String()
}

// TestTLSListenersReload: the node serves HTTPS (HTTP/2 and HTTP/1.1) and gRPC over TLS;
// plaintext is refused; swapping the certificate files makes the next connection of both
// listeners get the new certificate without a restart.
func TestTLSListenersReload(t *testing.T) {
	f := startTLSNode(t)
	url := f.n.URL()
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("URL %s: want https", url)
	}
	if got, err := httpsGet(url, f.trustA); err != nil || got != leafSerial(t, f.a.Cert) {
		t.Fatalf("https before the swap: %s, %v", got, err)
	}
	if err := grpcHealth(f.n.GRPCAddr(), f.trustA); err != nil {
		t.Fatalf("grpc TLS before the swap: %v", err)
	}
	if resp, err := http.Get("http://" + f.n.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext HTTP served on a TLS listener")
		}
	}
	if _, err := httpsGet(url, f.trustB); err == nil {
		t.Fatal("a client trusting another CA accepted the node's certificate")
	}

	install(t, f.b.Key, f.key)
	install(t, f.b.Cert, f.cert)
	if got, err := httpsGet(url, f.trustB); err != nil || got != leafSerial(t, f.b.Cert) {
		t.Fatalf("https after the swap: %s, %v; want %s", got, err, leafSerial(t, f.b.Cert))
	}
	if err := grpcHealth(f.n.GRPCAddr(), f.trustB); err != nil {
		t.Fatalf("grpc TLS after the swap: %v", err)
	}
	if err := grpcHealth(f.n.GRPCAddr(), f.trustA); err == nil {
		t.Fatal("grpc after the swap still served the old certificate")
	}
}

// TestGrpcurlTLS lists the services through reflection with the real grpcurl over TLS.
func TestGrpcurlTLS(t *testing.T) {
	bin := grpcurlBin(t)
	f := startTLSNode(t)
	out, err := exec.Command(bin, "-cacert", f.a.CA, f.n.GRPCAddr(), "list").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl -cacert list: %v\n%s", err, out)
	}
	for _, svc := range []string{"loam.v1.StreamService", "loam.v1.RecordService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(string(out), svc+"\n") {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, out)
		}
	}
	if out, err := exec.Command(bin, "-cacert", f.b.CA, f.n.GRPCAddr(), "list").CombinedOutput(); err == nil {
		t.Errorf("grpcurl trusting another CA listed the services:\n%s", out)
	}
	if out, err := exec.Command(bin, "-plaintext", f.n.GRPCAddr(), "list").CombinedOutput(); err == nil {
		t.Errorf("grpcurl -plaintext listed the services of a TLS listener:\n%s", out)
	}
}

// grpcurlBin finds grpcurl on PATH, then in <repo>/.tools/bin (.ci/tools.sh installs it
// there); missing, the test is skipped, or fails when LOAM_REQUIRE_SERVERS=1.
func grpcurlBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", ".tools", "bin", "grpcurl")
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p
	}
	msg := "grpcurl not found on PATH or in .tools/bin: run .ci/tools.sh"
	if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg + " [LOAM_REQUIRE_SERVERS=1]")
	}
	t.Skip(msg)
	return ""
}

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/shared/meta/metapb"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/tlsconf"
)

// buildLoamOnly builds ./cmd/loam, and nothing else, into a fresh directory: what
// `go install ./cmd/loam` leaves a user with.
func buildLoamOnly(t *testing.T) Binaries {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "loam"), "./cmd/loam")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/loam: %v\n%s", err, out)
	}
	return Binaries{Dir: dir, Loam: filepath.Join(dir, "loam")}
}

// outsideCheckout is what a user who ran only `go install ./cmd/loam` has: a working
// directory outside any checkout and a PATH holding neither sequencer-svc, lognode-svc
// nor go (so nothing can be built either).
func outsideCheckout(t *testing.T) (dir string, env []string) {
	t.Helper()
	path := "/usr/bin:/bin"
	for _, name := range []string{"sequencer-svc", "lognode-svc", "go"} {
		for _, d := range strings.Split(path, ":") {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				t.Fatalf("%s is in %s: the test needs a PATH without it", name, d)
			}
		}
	}
	return t.TempDir(), []string{"PATH=" + path}
}

// TestOneBinaryCluster: with only the loam binary, run from a directory outside the
// checkout, `loam dev --sequencers 3 --nodes 2` runs its children as `loam sequencer` and
// `loam lognode`, serves produce and fetch through both nodes, runs the background
// functions (segments appear in the bucket) and the node registry (each node lists both).
func TestOneBinaryCluster(t *testing.T) {
	bins := buildLoamOnly(t)
	wd, env := outsideCheckout(t)
	c := Start(t, bins, Options{Sequencers: 3, Nodes: 2, Dir: wd, Env: env, FlushInterval: 50 * time.Millisecond, Functions: true,
		DevArgs: []string{"--segment-target-bytes", "1024", "--segment-max-age", "1s"}})
	out := c.SupervisorOutput()
	for _, want := range []string{
		"sequencers run " + bins.Loam + " (this executable's sequencer subcommand)",
		"log nodes run " + bins.Loam + " (this executable's lognode subcommand)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("supervisor output lacks %q:\n%s", want, out)
		}
	}
	for _, id := range []string{"seq-1", "node-2"} {
		if l := c.LogTail(id, 200); !strings.Contains(l, bins.Loam+" "+map[string]string{"seq-1": "sequencer", "node-2": "lognode"}[id]+" --id "+id) {
			t.Errorf("%s's log does not show it started as a loam subcommand:\n%s", id, l)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stream = "onebin"
	if _, err := c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: stream, Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		v := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 200))
		want = append(want, v)
		if _, err := c.Client(i%2).Produce(ctx, ns, stream, []streamapi.Record{{Partition: ptr(int32(0)), Value: json.RawMessage(v)}}); err != nil {
			t.Fatalf("produce %d through node-%d: %v", i, i%2+1, err)
		}
	}
	got := fetchAll(ctx, t, c.Client(1), stream, 0, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("node-2 fetched %d records, want the %d produced in order:\n%q", len(got), len(want), got)
	}

	// The functions: the segmenter turns the WAL objects into segments.
	bucket, err := objstore.Open(ctx, filepath.Join(c.Dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	segs := func() []string {
		var keys []string
		bucket.List(ctx, "seg/", func(o objstore.ObjectInfo) error {
			if strings.HasSuffix(o.Key, ".seg") {
				keys = append(keys, o.Key)
			}
			return nil
		})
		return keys
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(segs()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no segment in %s after 60 s; supervisor output:\n%s", filepath.Join(c.Dir, "bucket"), c.SupervisorOutput())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got := fetchAll(ctx, t, c.Client(0), stream, 0, len(want)); !slices.Equal(got, want) {
		t.Fatalf("after segmenting node-1 fetched %q", got)
	}

	// The node registry: both nodes see both.
	waitNodes(ctx, t, c, []string{"node-1", "node-2"})
}

// waitNodes waits until GET /v1/cluster/nodes on every node lists exactly ids.
func waitNodes(ctx context.Context, t *testing.T, c *Cluster, ids []string) {
	t.Helper()
	for i := range ids {
		var have []string
		deadline := time.Now().Add(30 * time.Second)
		for {
			nodes, err := c.Client(i).ListNodes(ctx, "")
			have = have[:0]
			for _, n := range nodes {
				have = append(have, n.ID)
			}
			slices.Sort(have)
			if err == nil && slices.Equal(have, ids) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node-%d lists nodes %v (err %v), want %v", i+1, have, err, ids)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// fetcher is what fetchAll needs of the HTTP and the gRPC client.
type fetcher interface {
	Fetch(ctx context.Context, ns, stream string, partition int32, offset int64, maxBytes int32, maxWait time.Duration) (streamapi.FetchResponse, error)
}

// fetchAll reads partition p from offset 0 until it has n records.
func fetchAll(ctx context.Context, t *testing.T, f fetcher, stream string, p int32, n int) []string {
	t.Helper()
	var got []string
	off := int64(0)
	for len(got) < n {
		r, err := f.Fetch(ctx, ns, stream, p, off, 1<<20, time.Second)
		if err != nil {
			t.Fatalf("fetch %s/%d at %d: %v", stream, p, off, err)
		}
		for _, rec := range r.Records {
			got = append(got, string(rec.Value))
		}
		off = r.NextOffset
	}
	return got
}

// TestOneBinaryClusterTLS: `loam dev --tls --sequencers 3 --nodes 2` gives every child a
// certificate of a local CA: the nodes serve HTTPS and gRPC over TLS (the Go clients,
// curl --cacert and grpcurl -cacert reach them; plaintext does not), the voters take
// only mutual TLS with the cluster identity, and the banner says how to trust the CA.
func TestOneBinaryClusterTLS(t *testing.T) {
	bins := buildLoamOnly(t)
	wd, env := outsideCheckout(t)
	grpcPort, _ := freePortRanges(t, 2, 1)
	c := Start(t, bins, Options{Sequencers: 3, Nodes: 2, Dir: wd, Env: env, Functions: true,
		DevArgs: []string{"--tls", "--grpc-port", strconv.Itoa(grpcPort)}})
	cf := c.File()
	ca := filepath.Join(c.Dir, "tls", "ca.pem")
	if cf.CA != ca {
		t.Fatalf("cluster.json ca %q, want %q", cf.CA, ca)
	}
	// The banner follows the last readiness probe.
	out := c.SupervisorOutput()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out, "A child that dies") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		out = c.SupervisorOutput()
	}
	node1 := "https://" + cf.Nodes[0].HTTP
	grpc1 := "127.0.0.1:" + strconv.Itoa(grpcPort)
	for _, want := range []string{
		"curl --cacert " + ca + " " + node1 + "/healthz",
		"grpcurl -cacert " + ca + " " + grpc1 + " list",
		"export LOAM_CA_CERT=" + ca,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	for _, id := range []string{"seq-1", "seq-2", "seq-3", "node-1", "node-2"} {
		if _, err := os.Stat(filepath.Join(c.Dir, "tls", id+".pem")); err != nil {
			t.Errorf("no certificate of %s: %v", id, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The Go client over HTTPS, through both nodes.
	const stream = "tls"
	if _, err := c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: stream, Partitions: ptr(int32(1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(0).Produce(ctx, ns, stream, []streamapi.Record{{Value: json.RawMessage(`"over-https"`)}}); err != nil {
		t.Fatal(err)
	}
	// The Go client over gRPC with TLS, trusting only the CA.
	creds, err := credentials.NewClientTLSFromFile(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(grpc1, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := streamapi.NewGRPCClient(conn)
	if _, err := gc.Produce(ctx, ns, stream, []streamapi.Record{{Value: json.RawMessage(`"over-grpc"`)}}); err != nil {
		t.Fatalf("gRPC produce over TLS: %v", err)
	}
	want := []string{`"over-https"`, `"over-grpc"`}
	if got := fetchAll(ctx, t, gc, stream, 0, 2); !slices.Equal(got, want) {
		t.Fatalf("gRPC fetch %q, want %q", got, want)
	}
	if got := fetchAll(ctx, t, c.Client(1), stream, 0, 2); !slices.Equal(got, want) {
		t.Fatalf("node-2 HTTPS fetch %q, want %q", got, want)
	}
	waitNodes(ctx, t, c, []string{"node-1", "node-2"})

	// curl and grpcurl with the CA; without it they are refused.
	if b, err := exec.Command("curl", "-sS", "--fail", "--cacert", ca, "https://"+cf.Nodes[1].HTTP+"/healthz").CombinedOutput(); err != nil || !strings.Contains(string(b), `"ok"`) {
		t.Errorf("curl --cacert: %v: %s", err, b)
	}
	if b, err := exec.Command("curl", "-sS", "https://"+cf.Nodes[1].HTTP+"/healthz").CombinedOutput(); err == nil {
		t.Errorf("curl without the CA succeeded: %s", b)
	}
	if b, err := exec.Command("curl", "-sS", "http://"+cf.Nodes[1].HTTP+"/healthz").CombinedOutput(); err == nil && strings.Contains(string(b), `"ok"`) {
		t.Errorf("plaintext HTTP served: %s", b)
	}
	grpcurl, err := exec.LookPath("grpcurl")
	if err != nil {
		grpcurl = "/work/main/.tools/bin/grpcurl"
		if _, err := os.Stat(grpcurl); err != nil {
			t.Fatalf("grpcurl not on PATH nor in %s", grpcurl)
		}
	}
	for _, addr := range []string{grpc1, "127.0.0.1:" + strconv.Itoa(grpcPort+1)} {
		b, err := exec.Command(grpcurl, "-cacert", ca, addr, "list").CombinedOutput()
		if err != nil || !strings.Contains(string(b), "loam.v1.StreamService") {
			t.Errorf("grpcurl -cacert %s list: %v:\n%s", addr, err, b)
		}
	}
	if b, err := exec.Command(grpcurl, "-plaintext", grpc1, "list").CombinedOutput(); err == nil {
		t.Errorf("grpcurl -plaintext succeeded:\n%s", b)
	}

	// The voters: a call without the cluster identity is refused; with the CA's client
	// certificate `loam sequencer members` lists the group.
	seq := cf.Sequencers[0].RPC
	if pc, err := grpc.NewClient(seq, grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := metapb.NewSequencerClient(pc).ListNamespaces(cctx, &metapb.ListNamespacesRequest{})
		ccancel()
		pc.Close()
		if err == nil {
			t.Errorf("a plaintext call to sequencer %s succeeded", seq)
		}
	}
	if b, err := exec.Command("curl", "-sS", "--cacert", ca, "https://"+seq+"/").CombinedOutput(); err == nil {
		t.Errorf("a TLS call without a client certificate to sequencer %s succeeded: %s", seq, b)
	}
	// The coordination store: HTTPS, and only for holders of a certificate of the CA.
	if !strings.HasPrefix(cf.Coord, "https://127.0.0.1:") {
		t.Errorf("coordination store %q, want https://127.0.0.1:PORT", cf.Coord)
	}
	if b, err := exec.Command("curl", "-sS", "--cacert", ca, cf.Coord+"/").CombinedOutput(); err == nil {
		t.Errorf("the coordination store answered a caller without a certificate: %s", b)
	}
	if b, err := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca, "--cert", filepath.Join(c.Dir, "tls", "client.pem"),
		"--key", filepath.Join(c.Dir, "tls", "client-key.pem"), cf.Coord+"/").CombinedOutput(); err != nil || string(b) == "000" {
		t.Errorf("the coordination store refused the cluster identity: %v: %s", err, b)
	}
	dev := tlsconf.DevFiles{CA: ca, ClientCert: filepath.Join(c.Dir, "tls", "client.pem"), ClientKey: filepath.Join(c.Dir, "tls", "client-key.pem")}
	m := exec.Command(bins.Loam, "sequencer", "members", "--cluster", seq, "--cluster-ca", dev.CA, "--tls-cert", dev.ClientCert, "--tls-key", dev.ClientKey)
	m.Dir, m.Env = wd, append(os.Environ(), env...)
	b, err := m.CombinedOutput()
	if err != nil || strings.Count(string(b), "voter") != 3 {
		t.Errorf("loam sequencer members: %v:\n%s", err, b)
	}
}

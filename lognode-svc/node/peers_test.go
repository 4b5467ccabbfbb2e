package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/peerfill"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/tlsconf"
)

// counter reads a counter (summed over its series) from a node's /metrics registry.
func counter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// walReads counts the GETs and range GETs a node's bucket served (no segmenter runs here, so
// they are reads of WAL objects).
func walReads(s objstore.Stats) int64 { return s.Gets + s.GetRanges }

type peerNode struct {
	n      *node.Node
	bucket *objstore.CountingBucket
	client *streamapi.Client
}

func startPeerNodes(t *testing.T, mc meta.Client, zones []string, identity *tlsconf.Source) []peerNode {
	t.Helper()
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	shared := objstore.NewMem()
	var out []peerNode
	for i, z := range zones {
		b := objstore.Counting(shared)
		n, err := node.Start(context.Background(), node.Config{NodeID: fmt.Sprintf("p-%d", i+1), Zone: z, HTTPAddr: "127.0.0.1:0",
			Bucket: b, Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: quiet(),
			Registry: &coord.Registry{Store: store}, PeerAddr: "127.0.0.1:0", PeerIdentity: identity})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		cl, err := streamapi.NewClient(n.URL())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, peerNode{n: n, bucket: b, client: cl})
	}
	return out
}

// TestZonePeersTailFilledAtWriteTime: what a node commits reaches the tail cache of the
// other node of its zone, which then serves it without reading the WAL object; the node of
// another zone is not filled and reads the bucket.
func TestZonePeersTailFilledAtWriteTime(t *testing.T) {
	mc := startSequencer(t)
	nodes := startPeerNodes(t, mc, []string{"z1", "z1", "z2"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b, c := nodes[0], nodes[1], nodes[2]
	one := int32(1)
	if _, err := a.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "fill", Partitions: &one}); err != nil {
		t.Fatal(err)
	}
	// The writer learns its peers from the registry: every node has heartbeated at Start.
	const n = 20
	for i := range n {
		if _, err := a.client.Produce(ctx, "default", "fill", []streamapi.Record{{Value: []byte(fmt.Sprintf("%q", fmt.Sprint("r", i)))}}); err != nil {
			t.Fatal(err)
		}
	}
	for counter(t, b.n.Gatherer(), "loam_peer_fill_chunks_received_total") < n {
		if ctx.Err() != nil {
			t.Fatalf("node b received %v fills, want %d", counter(t, b.n.Gatherer(), "loam_peer_fill_chunks_received_total"), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := counter(t, c.n.Gatherer(), "loam_peer_fill_chunks_received_total"); got != 0 {
		t.Fatalf("node c (another zone) received %v fills", got)
	}
	if got := counter(t, a.n.Gatherer(), "loam_peer_fill_chunks_sent_total"); got != n {
		t.Fatalf("node a sent %v chunks, want %d (one per commit, to its one zone peer)", got, n)
	}
	fetchAll := func(p peerNode) []string {
		t.Helper()
		res, err := p.client.Fetch(ctx, "default", "fill", 0, 0, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		for _, r := range res.Records {
			vals = append(vals, string(r.Value))
		}
		return vals
	}
	before := walReads(b.bucket.Stats())
	gotB := fetchAll(b)
	if len(gotB) != n {
		t.Fatalf("node b fetched %d records, want %d", len(gotB), n)
	}
	if reads := walReads(b.bucket.Stats()) - before; reads != 0 {
		t.Fatalf("node b read WAL objects %d times for records its peer filled", reads)
	}
	beforeC := walReads(c.bucket.Stats())
	gotC := fetchAll(c)
	if fmt.Sprint(gotC) != fmt.Sprint(gotB) {
		t.Fatalf("node c fetched %v, node b %v", gotC, gotB)
	}
	if walReads(c.bucket.Stats()) == beforeC {
		t.Fatal("node c, not filled, served without reading the bucket: the check proves nothing")
	}
}

// TestPeerFillsNeedClusterIdentity: with the cluster identity, peers fill each other over
// mutual TLS, and a caller without a certificate of the cluster CA is refused.
func TestPeerFillsNeedClusterIdentity(t *testing.T) {
	files, err := tlsconf.GenerateDev(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := tlsconf.Load(files.DevConfig())
	if err != nil {
		t.Fatal(err)
	}
	mc := startSequencer(t)
	nodes := startPeerNodes(t, mc, []string{"z1", "z1"}, id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := nodes[0], nodes[1]
	one := int32(1)
	if _, err := a.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "fill", Partitions: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.Produce(ctx, "default", "fill", []streamapi.Record{{Value: []byte(`"x"`)}}); err != nil {
		t.Fatal(err)
	}
	for counter(t, b.n.Gatherer(), "loam_peer_fill_chunks_received_total") < 1 {
		if ctx.Err() != nil {
			t.Fatal("no fill reached node b over mutual TLS")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A caller that trusts the CA but presents no certificate is refused at the handshake;
	// plaintext is refused too.
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	frame := peerfill.Append(nil, nil)
	for _, url := range []string{"https://" + b.n.PeerAddr() + peerfill.Path, "http://" + b.n.PeerAddr() + peerfill.Path} {
		res, err := noCert.Post(url, peerfill.ContentType, bytes.NewReader(frame))
		if err == nil {
			// Plaintext to a TLS listener gets Go's own 400 ("client sent an HTTP request to
			// an HTTPS server"); the fill handler never sees the request.
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusNoContent || bytes.Contains(body, []byte(`"code"`)) {
				t.Fatalf("%s without the cluster identity reached the handler: %s %s", url, res.Status, body)
			}
		}
	}
}

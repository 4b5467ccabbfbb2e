package kafka_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// TestFrameLimit: a length prefix over the frame limit closes the connection before
// anything of the frame is read (the client's frame is never read: the close comes
// while the client still has bytes to send), and a negative length does too.
func TestFrameLimit(t *testing.T) {
	e := start(t, func(c *node.Config) { c.KafkaMaxFrameBytes = 1 << 20 })
	for _, n := range []uint32{1<<20 + 1, 1 << 31, 3} {
		c, err := net.Dial("tcp", e.kafka)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(binary.BigEndian.AppendUint32(nil, n))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if !errors.Is(err, io.EOF) && !strings.Contains(fmtErr(err), "reset") {
			t.Fatalf("length %d: read %v, want the connection closed", n, err)
		}
		c.Close()
	}
	// The listener still serves.
	if _, err := e.client(t).Request(ctx(t), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestApiVersionsExact: ApiVersions lists exactly the keys served; a version past the
// maximum answers v0 UNSUPPORTED_VERSION with the list.
func TestApiVersionsExact(t *testing.T) {
	e := start(t)
	cl := e.client(t)
	resp := raw[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{0: {3, 12}, 1: {4, 12}, 2: {1, 8}, 3: {1, 12}, 17: {1, 1}, 18: {0, 4}, 19: {2, 7}, 20: {1, 6},
		22: {0, 5}, 32: {0, 4}, 33: {0, 2}, 36: {0, 2}, 37: {0, 3}, 44: {0, 1}, 60: {0, 2},
		// The node's group coordinator (package kafka/group) and FindCoordinator with it.
		10: {0, 6}}
	gcfg := group.DefaultConfig()
	gcfg.Meta = e.meta
	coord, err := group.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	for k, v := range coord.Versions() {
		want[k] = v
	}
	if len(got) != len(want) {
		t.Fatalf("ApiVersions lists %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %d: %v, want %v", k, got[k], v)
		}
	}
	// v5 of ApiVersions is past what is served.
	c, err := net.Dial("tcp", e.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5
	c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 7))
	var size [4]byte
	io.ReadFull(c, size[:])
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	r0 := kmsg.NewPtrApiVersionsResponse()
	r0.Version = 0
	if err := r0.ReadFrom(body[4:]); err != nil || r0.ErrorCode != kerr.UnsupportedVersion.Code || len(r0.ApiKeys) != len(want) {
		t.Fatalf("v5: %v code %d keys %d", err, r0.ErrorCode, len(r0.ApiKeys))
	}
}

// TestSASLPlain: a listener checking keys serves a client that authenticates with SASL
// PLAIN and an API key; its topics are the key's namespace's. A wrong key is refused
// SASL_AUTHENTICATION_FAILED, and a client without SASL is cut off.
func TestSASLPlain(t *testing.T) {
	var mc meta.Client
	e := start(t, func(c *node.Config) {
		mc = c.Meta
		c.Auth = auth.New(c.Meta, auth.Options{TTL: 100 * time.Millisecond})
	})
	bg := context.Background()
	if err := mc.CreateNamespace(bg, "team"); err != nil {
		t.Fatal(err)
	}
	token, k, err := auth.NewKey(false, "team", "kafka test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateKey(bg, k); err != nil {
		t.Fatal(err)
	}
	sasl := func(pass string) kgo.Opt {
		return kgo.SASL(plain.Auth{User: "anyone", Pass: pass}.AsMechanism())
	}
	adm := e.admin(t, sasl(token))
	if res, err := adm.CreateTopic(ctx(t), 2, 1, nil, "events"); err != nil || res.Err != nil {
		t.Fatalf("create over SASL: %v %v", err, res.Err)
	}
	if _, _, err := mc.GetStream(bg, "team", "events"); err != nil {
		t.Fatalf("the topic is not a stream of the key's namespace: %v", err)
	}
	if _, _, err := mc.GetStream(bg, "default", "events"); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("the topic landed in namespace default: %v", err)
	}
	p := e.client(t, sasl(token), kgo.DefaultProduceTopic("events"))
	if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bad := e.client(t, sasl("loam_0123456789abcdef01234567_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), kgo.RequestRetries(0))
	if _, err := bad.Request(ctx(t), kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong key: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	none := e.client(t, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	c2, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	if _, err := none.Request(c2, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a client without SASL was served")
	}
}

// TestZonesAndRegistry: Metadata names the live nodes of the client's zone
// (loam_az=<zone> in its client id) as the brokers and leaders; a client with no zone
// sees every live node; a node that stops heartbeating leaves Metadata once its TTL
// passes; an advertised listener is named as the only broker.
func TestZonesAndRegistry(t *testing.T) {
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := &coord.Registry{Store: store}
	e := start(t, func(c *node.Config) { c.Registry, c.Zone, c.HeartbeatTTL = reg, "zone-a", time.Second })
	bucket, mc := objstore.NewMem(), e.meta
	n2, err := node.Start(context.Background(), node.Config{NodeID: "k-2", Zone: "zone-b", HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Bucket: bucket, Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: quiet(), Registry: reg, HeartbeatTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close(context.Background())
	e.createTopic(t, "z", 4)
	brokers := func(clientID string) map[string]bool {
		cl := e.client(t, kgo.ClientID(clientID))
		resp := raw[*kmsg.MetadataResponse](t, cl, &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("z")}}})
		ids := map[int32]string{}
		out := map[string]bool{}
		for _, b := range resp.Brokers {
			addr := net.JoinHostPort(b.Host, itoa(b.Port))
			ids[b.NodeID] = addr
			out[addr] = true
		}
		for _, p := range resp.Topics[0].Partitions {
			if ids[p.Leader] == "" {
				t.Fatalf("partition %d's leader %d is not among the brokers %v", p.Partition, p.Leader, ids)
			}
		}
		return out
	}
	// A lookup of the live nodes is reused for a second.
	waitFor(t, func() bool { b := brokers("app,loam_az=zone-b"); return len(b) == 1 && b[n2.KafkaAddr()] })
	if b := brokers("app,loam_az=zone-a"); len(b) != 1 || !b[e.kafka] {
		t.Fatalf("zone a: %v", b)
	}
	if b := brokers("app"); len(b) != 2 {
		t.Fatalf("no zone: %v, want both nodes", b)
	}
	// A node that stops heartbeating (killed: no Leave) drops out after its TTL.
	if err := reg.Heartbeat(context.Background(), coord.Node{ID: "ghost", Zone: "zone-c", KafkaAddr: "127.0.0.1:1"}, time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return brokers("loam_az=zone-c")["127.0.0.1:1"] })
	waitFor(t, func() bool { return !brokers("loam_az=zone-c")["127.0.0.1:1"] })

	lb := start(t, func(c *node.Config) { c.KafkaAdvertisedListener = "lb.example:9092" })
	cl := lb.client(t)
	resp := raw[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "lb.example" || resp.Brokers[0].Port != 9092 {
		t.Fatalf("advertised listener: %+v", resp.Brokers)
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

func waitFor(t testing.TB, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSASLOverTLS: with the node's TLS configuration the Kafka listener serves TLS, and
// SASL/PLAIN runs inside it; a plaintext client is not served.
func TestSASLOverTLS(t *testing.T) {
	files, err := tlsconf.GenerateDev(filepath.Join(t.TempDir(), "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(tlsconf.Config{CertFile: files.Cert, KeyFile: files.Key, CheckInterval: -1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var mc meta.Client
	e := start(t, func(c *node.Config) {
		mc = c.Meta
		c.TLS = src
		c.Auth = auth.New(c.Meta, auth.Options{})
	})
	token, k, err := auth.NewKey(true, "", "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl := e.client(t, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}),
		kgo.SASL(plain.Auth{User: "default", Pass: token}.AsMechanism()))
	if res, err := kadm.NewClient(cl).CreateTopic(ctx(t), 1, 1, nil, "secure"); err != nil || res.Err != nil {
		t.Fatalf("create over TLS + SASL: %v %v", err, res.Err)
	}
	if _, _, err := mc.GetStream(context.Background(), "default", "secure"); err != nil {
		t.Fatalf("an admin key acts in the namespace its user name names: %v", err)
	}
	plainCl := e.client(t, kgo.RequestRetries(0), kgo.SASL(plain.Auth{User: "default", Pass: token}.AsMechanism()))
	c2, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := plainCl.Request(c2, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a plaintext client was served by a TLS listener")
	}
}

// TestBadFrameClosesAfterEarlierAnswers: requests pipelined on one connection are
// answered in order up to one the server cannot serve (an API key it does not serve),
// which closes the connection: the request after it, already sent and read, gets no
// answer, and the listener goes on serving.
func TestBadFrameClosesAfterEarlierAnswers(t *testing.T) {
	e := start(t)
	c, err := net.Dial("tcp", e.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := func(key, version int16, corr int32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	var out []byte
	out = append(out, frame(18, 0, 1)...)  // ApiVersions v0
	out = append(out, frame(999, 0, 2)...) // not a key served
	out = append(out, frame(18, 0, 3)...)  // read, never answered
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("first answer: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 1 {
		t.Fatalf("first answer's correlation id %d, want 1", corr)
	}
	if n, err := c.Read(size[:]); !errors.Is(err, io.EOF) && !strings.Contains(fmtErr(err), "reset") {
		t.Fatalf("after the unserved key: read %d bytes, %v; want the connection closed", n, err)
	}
	if _, err := e.client(t).Request(ctx(t), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
}

package group

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
)

// testCluster is a minimal Kafka server for tests of the coordinator with real clients: a
// TCP front that serves the group API keys with the Coordinator (over the real in-process
// sequencer) and forwards everything else to a kfake cluster of one broker (produce, fetch,
// metadata), rewriting the broker addresses it answers to the front's and ApiVersions to
// the coordinator's versions. Each connection is served one request at a time, in order,
// as a broker does.
type testCluster struct {
	t     testing.TB
	seq   *server.Node
	meta  meta.Client
	kf    *kfake.Cluster
	cfg   Config
	cmu   sync.Mutex
	coord *Coordinator
	lis   net.Listener
	addr  string
	ns    string

	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newTestCluster(t testing.TB, topics map[string]int32, opts ...func(*Config)) *testCluster {
	t.Helper()
	seq := servertest.Start(t)
	mc := server.NewLocalClient(seq)
	ctx := context.Background()
	var kopts []kfake.Opt
	kopts = append(kopts, kfake.NumBrokers(1))
	for name, n := range topics {
		kopts = append(kopts, kfake.SeedTopics(n, name))
		if _, err := mc.CreateStream(ctx, meta.StreamConfig{Name: name, Partitions: n}); err != nil {
			t.Fatal(err)
		}
	}
	kf, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	tc := &testCluster{t: t, seq: seq, meta: mc, kf: kf, ns: meta.DefaultNS, conns: map[net.Conn]bool{}}
	cfg := DefaultConfig()
	cfg.Meta = mc
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.MinSessionTimeout = 100 * time.Millisecond
	cfg.ConsumerSessionTimeout, cfg.ConsumerHeartbeatInterval = 3*time.Second, 200*time.Millisecond
	cfg.TopicRefresh = 200 * time.Millisecond
	cfg.TopicID = func(ns string, s meta.Stream) [16]byte {
		if ti := kf.TopicInfo(s.Name); ti != nil {
			return ti.TopicID
		}
		return TopicID(ns, s)
	}
	for _, o := range opts {
		o(&cfg)
	}
	tc.cfg = cfg
	if tc.coord, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.coordinator().Close() })
	if tc.lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tc.addr = tc.lis.Addr().String()
	go tc.accept()
	t.Cleanup(tc.close)
	return tc
}

func (tc *testCluster) coordinator() *Coordinator {
	tc.cmu.Lock()
	defer tc.cmu.Unlock()
	return tc.coord
}

// restartCoordinator replaces the coordinator by a new one over the same sequencer, as a
// log node restart (or the group moving to another node) does: the old one's waiters are
// answered NOT_COORDINATOR and the members are gone.
func (tc *testCluster) restartCoordinator() {
	n, err := New(tc.cfg)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.cmu.Lock()
	old := tc.coord
	tc.coord = n
	tc.cmu.Unlock()
	old.Close()
}

func (tc *testCluster) close() {
	tc.lis.Close()
	tc.mu.Lock()
	for c := range tc.conns {
		c.Close()
	}
	tc.mu.Unlock()
}

func (tc *testCluster) accept() {
	for {
		c, err := tc.lis.Accept()
		if err != nil {
			return
		}
		tc.mu.Lock()
		tc.conns[c] = true
		tc.mu.Unlock()
		go tc.serve(c)
	}
}

// serve answers one client connection's requests in order.
func (tc *testCluster) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", tc.kf.ListenAddrs()[0])
	if err != nil {
		return
	}
	defer up.Close()
	tc.mu.Lock()
	tc.conns[up] = true
	tc.mu.Unlock()
	for {
		frame, err := readFrame(c)
		if err != nil {
			return
		}
		out, err := tc.answer(frame, up)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				tc.t.Logf("test cluster: %v", err)
			}
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 100<<20 {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	b := make([]byte, 4+size)
	copy(b, n[:])
	_, err := io.ReadFull(r, b[4:])
	return b, err
}

// header parses a request header: key, version, correlation id, client id, and the
// offset of the body.
func header(frame []byte) (key, version int16, corr int32, client string, body int, err error) {
	b := frame[4:]
	if len(b) < 10 {
		return 0, 0, 0, "", 0, errors.New("short header")
	}
	key, version = int16(binary.BigEndian.Uint16(b)), int16(binary.BigEndian.Uint16(b[2:]))
	corr = int32(binary.BigEndian.Uint32(b[4:]))
	n := int(int16(binary.BigEndian.Uint16(b[8:])))
	i := 10
	if n > 0 {
		if i+n > len(b) {
			return 0, 0, 0, "", 0, errors.New("short client id")
		}
		client = string(b[i : i+n])
		i += n
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, 0, "", 0, fmt.Errorf("unknown key %d", key)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		tags, m := binary.Uvarint(b[i:])
		if m <= 0 {
			return 0, 0, 0, "", 0, errors.New("bad tags")
		}
		i += m
		for range tags {
			_, m1 := binary.Uvarint(b[i:])
			if m1 <= 0 {
				return 0, 0, 0, "", 0, errors.New("bad tag")
			}
			size, m2 := binary.Uvarint(b[i+m1:])
			if m2 <= 0 {
				return 0, 0, 0, "", 0, errors.New("bad tag size")
			}
			i += m1 + m2 + int(size)
		}
	}
	return key, version, corr, client, 4 + i, nil
}

func (tc *testCluster) answer(frame []byte, up net.Conn) ([]byte, error) {
	key, version, corr, client, body, err := header(frame)
	if err != nil {
		return nil, err
	}
	flexibleResp := func(r kmsg.Response) bool { return r.IsFlexible() && key != 18 }
	coord := tc.coordinator()
	if _, ok := coord.Versions()[key]; ok {
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if err := req.ReadFrom(frame[body:]); err != nil {
			return nil, fmt.Errorf("decode key %d v%d: %w", key, version, err)
		}
		host, _, _ := net.SplitHostPort(up.LocalAddr().String())
		ctx := WithClient(context.Background(), client, "/"+host)
		resp, err := coord.Handle(ctx, tc.ns, req)
		if err != nil {
			return nil, err
		}
		return encode(corr, resp, flexibleResp(resp)), nil
	}
	if _, err := up.Write(frame); err != nil {
		return nil, err
	}
	out, err := readFrame(up)
	if err != nil {
		return nil, err
	}
	var resp kmsg.Response
	switch key {
	case 18, 3, 10: // ApiVersions, Metadata, FindCoordinator: rewritten
		resp = kmsg.ResponseForKey(key)
	default:
		return out, nil
	}
	resp.SetVersion(version)
	off := 8
	if flexibleResp(resp) {
		off++ // an empty tag section
	}
	if err := resp.ReadFrom(out[off:]); err != nil {
		return nil, fmt.Errorf("decode response key %d v%d: %w", key, version, err)
	}
	host, p, _ := net.SplitHostPort(tc.addr)
	port, _ := strconv.Atoi(p)
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		vs := coord.Versions()
		keep := r.ApiKeys[:0]
		for _, k := range r.ApiKeys {
			if v, ok := vs[k.ApiKey]; ok {
				k.MinVersion, k.MaxVersion = v[0], v[1]
			} else if k.ApiKey == 28 || k.ApiKey == 76 || k.ApiKey == 77 || k.ApiKey == 78 || k.ApiKey == 79 {
				continue // transactional offsets and share groups are not this coordinator's
			}
			keep = append(keep, k)
		}
		r.ApiKeys = keep
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = host, int32(port)
		}
	case *kmsg.FindCoordinatorResponse:
		r.Host, r.Port = host, int32(port)
		for i := range r.Coordinators {
			r.Coordinators[i].Host, r.Coordinators[i].Port = host, int32(port)
		}
	}
	return encode(corr, resp, flexibleResp(resp)), nil
}

func encode(corr int32, resp kmsg.Response, flexible bool) []byte {
	b := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if flexible {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

package kafka_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/objstore"
)

// countingGroups is a minimal group handler for the dispatch tests: it serves Heartbeat
// and FindCoordinator's companions only, answering REBALANCE_IN_PROGRESS so a test can
// tell its answer from an error, and counts the requests it served.
type countingGroups struct {
	served atomic.Int64
	ns     atomic.Value
}

func (g *countingGroups) Versions() map[int16][2]int16 { return map[int16][2]int16{12: {0, 4}} }

func (g *countingGroups) Handle(_ context.Context, ns string, req kmsg.Request) (kmsg.Response, error) {
	g.served.Add(1)
	g.ns.Store(ns)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = kerr.RebalanceInProgress.Code
	return resp, nil
}

// TestGroupDispatchAndForwarding: with a group handler, ApiVersions lists its keys and
// FindCoordinator; FindCoordinator answers the rendezvous owner of the group among the
// live nodes; a group request reaching a node that does not own the group is forwarded to
// the owner (behind a load balancer every node may receive it) and the owner's answer
// relayed.
func TestGroupDispatchAndForwarding(t *testing.T) {
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := &coord.Registry{Store: store}
	g1, g2 := &countingGroups{}, &countingGroups{}
	e := start(t, func(c *node.Config) { c.Registry, c.KafkaGroups = reg, g1 })
	n2, err := node.Start(context.Background(), node.Config{NodeID: "k-2", HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: e.meta, FlushInterval: 5 * time.Millisecond, Logger: quiet(), Registry: reg, KafkaGroups: g2})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close(context.Background())
	cl1 := kgo.Opt(kgo.SeedBrokers(e.kafka))
	c1, _ := kgo.NewClient(cl1)
	defer c1.Close()
	av := raw[*kmsg.ApiVersionsResponse](t, c1, kmsg.NewPtrApiVersionsRequest())
	listed := map[int16]bool{}
	for _, k := range av.ApiKeys {
		listed[k.ApiKey] = true
	}
	if !listed[12] || !listed[10] || listed[11] {
		t.Fatalf("ApiVersions with the group handler: %v", listed)
	}
	// Both nodes see both in the registry (a second to refresh the cached live list).
	var owner string
	waitFor(t, func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{"g"}
		resp, err := c1.Request(ctx(t), fc)
		if err != nil {
			return false
		}
		co := resp.(*kmsg.FindCoordinatorResponse).Coordinators[0]
		owner = net2(co.Host, co.Port)
		return len(raw[*kmsg.MetadataResponse](t, c1, kmsg.NewPtrMetadataRequest()).Brokers) == 2
	})
	other := e.kafka
	if owner == e.kafka {
		other = n2.KafkaAddr()
	}
	// Send the heartbeat to the node that does not own the group, on a direct connection.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "m", 1
	resp := direct(t, other, hb)
	if c := resp.(*kmsg.HeartbeatResponse).ErrorCode; c != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat answered %v", kerr.ErrorForCode(c))
	}
	ownerG, otherG := g1, g2
	if owner != e.kafka {
		ownerG, otherG = g2, g1
	}
	if ownerG.served.Load() != 1 || otherG.served.Load() != 0 {
		t.Fatalf("owner served %d, non-owner %d: want the request forwarded to the owner", ownerG.served.Load(), otherG.served.Load())
	}
	if ns, _ := ownerG.ns.Load().(string); ns != "default" {
		t.Fatalf("handler got namespace %q", ns)
	}
}

func net2(host string, port int32) string { return host + ":" + itoa(port) }

// direct sends req, at its version, on a new connection to addr and answers the response.
func direct(t testing.TB, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	rest := body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		rest = rest[1:] // empty header tags
	}
	if err := resp.ReadFrom(rest); err != nil {
		t.Fatal(err)
	}
	return resp
}

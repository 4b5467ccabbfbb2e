package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) Committed(key string) { k.mu.Lock(); k.keys = append(k.keys, key); k.mu.Unlock() }

func (k *keyLog) list() []string { k.mu.Lock(); defer k.mu.Unlock(); return slices.Clone(k.keys) }

func expressZones(t *testing.T) ([3]*objstore.CountingBucket, *objstore.Express) {
	t.Helper()
	var zs [3]*objstore.CountingBucket
	var zones []objstore.Zone
	for i := range zs {
		zs[i] = objstore.Counting(objstore.NewMem())
		zones = append(zones, objstore.Zone{Name: fmt.Sprintf("zone-%c", 'a'+i), Bucket: zs[i]})
	}
	e, err := objstore.NewExpress(objstore.ExpressConfig{Zones: zones, Local: "zone-b", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return zs, e
}

func startExpressNode(t *testing.T, id string, m meta.Client, std objstore.Bucket, exp objstore.Bucket, off node.ExpressNotifier) *node.Node {
	t.Helper()
	n, err := node.Start(context.Background(), node.Config{NodeID: id, Zone: "zone-b", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: std, Meta: m, FlushInterval: time.Hour, ExpressBucket: exp, ExpressOffload: off, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func fetchAll(t *testing.T, url, stream string) []streamapi.Record {
	t.Helper()
	resp, err := http.Get(url + "/v1/namespaces/default/streams/" + stream + "/partitions/0/records?offset=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var fr streamapi.FetchResponse
	if err := json.NewDecoder(resp.Body).Decode(&fr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("fetch %s: %d %v", stream, resp.StatusCode, err)
	}
	return fr.Records
}

// TestExpressStreams: a node with an express bucket accepts class express on create (HTTP
// and gRPC), commits express produces within the express flush while the standard class's
// flush interval is an hour, writes them to the zonal buckets only, tells the offload of
// each object, and serves them; a cold node serves identical records from the zones.
func TestExpressStreams(t *testing.T) {
	m := startSequencer(t)
	std := objstore.Counting(objstore.NewMem())
	zs, exp := expressZones(t)
	off := &keyLog{}
	n := startExpressNode(t, "n-1", m, std, exp, off)
	url := n.URL()
	if code, body := post(t, url+"/v1/namespaces/default/streams", `{"name":"fast","class":"express"}`); code != http.StatusCreated {
		t.Fatalf("create express stream over HTTP: %d %s", code, body)
	}
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cr, err := loamv1pb.NewStreamServiceClient(conn).CreateStream(ctx, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "fast2", Class: meta.ClassExpress})
	if err != nil || cr.GetStream().GetClass() != meta.ClassExpress {
		t.Fatalf("create express stream over gRPC: %v %v", cr, err)
	}
	for i := range 10 {
		start := time.Now()
		code, body := post(t, url+"/v1/namespaces/default/streams/fast/records", fmt.Sprintf(`{"records":[{"value":%d}]}`, i))
		if code != 200 {
			t.Fatalf("produce %d: %d %s", i, code, body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("express produce took %v", d)
		}
	}
	if s := std.Stats(); s.Puts != 0 {
		t.Fatalf("standard bucket: %d PUTs for express produces, want 0", s.Puts)
	}
	var held int
	for _, z := range zs {
		if err := z.List(ctx, "", func(o objstore.ObjectInfo) error {
			if !strings.HasPrefix(o.Key, "wal/express/n-1/") {
				t.Errorf("zone object %q", o.Key)
			}
			held++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if held < 20 { // ten objects, at least two copies each
		t.Fatalf("%d copies of 10 express objects in the zones, want >= 20", held)
	}
	if keys := off.list(); len(keys) != 10 || !strings.HasPrefix(keys[0], "wal/express/n-1/") {
		t.Fatalf("offload heard of %q, want the 10 express objects", keys)
	}
	hot := fetchAll(t, url, "fast")
	if len(hot) != 10 {
		t.Fatalf("fetch: %d records, want 10", len(hot))
	}
	// A cold node (no tail cache) reads the zones: zone-b, its own, first.
	before := zs[1].Stats()
	cold := startExpressNode(t, "n-2", m, std, exp, nil)
	deadline := time.Now().Add(20 * time.Second)
	var got []streamapi.Record
	for time.Now().Before(deadline) {
		if got = fetchAll(t, cold.URL(), "fast"); len(got) == 10 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	h, _ := json.Marshal(hot)
	g, _ := json.Marshal(got)
	if string(h) != string(g) {
		t.Fatalf("cold node fetched\n%s\nthe producing node\n%s", g, h)
	}
	if s := zs[1].Stats().Sub(before); s.Gets+s.GetRanges == 0 {
		t.Fatalf("cold node read nothing from its own zone's bucket: %+v", s)
	}
}

// TestExpressRefusedWithoutBucket: a node without an express bucket refuses the class.
func TestExpressRefusedWithoutBucket(t *testing.T) {
	n, url := startNode(t, httpapi.Limits{})
	defer n.Close(context.Background())
	code, body := post(t, url+"/v1/namespaces/default/streams", `{"name":"fast","class":"express"}`)
	if code != 400 || !strings.Contains(string(body), streamapi.CodeUnsupportedClass) {
		t.Fatalf("create express without an express bucket: %d %s", code, body)
	}
	if _, err := node.Start(context.Background(), node.Config{NodeID: "x", Bucket: objstore.NewMem(), Meta: startSequencer(t), ExpressOffload: &keyLog{}}); err == nil {
		t.Fatal("ExpressOffload without ExpressBucket: no error")
	}
}

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// quorumNodes starts three log nodes sharing a sequencer and a bucket, each a member of
// the quorum journal.
func quorumNodes(t *testing.T) ([]*node.Node, []string) {
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	var voters []node.JournalVoter
	for i := 0; i < 3; i++ {
		voters = append(voters, node.JournalVoter{ID: fmt.Sprintf("q-%d", i), Addr: freeAddr(t)})
	}
	nodes := make([]*node.Node, 3)
	urls := make([]string, 3)
	base := t.TempDir()
	for i := range nodes {
		n, err := node.Start(context.Background(), node.Config{NodeID: voters[i].ID, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 5 * time.Millisecond, Logger: quiet(),
			Quorum: node.QuorumConfig{Addr: voters[i].Addr, Dir: fmt.Sprintf("%s/%d", base, i), Voters: voters, NoSync: true}})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i], urls[i] = n, "http://"+n.Addr()
		t.Cleanup(func() { closeNode(nodes[i]) })
	}
	return nodes, urls
}

func closeNode(n *node.Node) {
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.Close(ctx)
}

type produceAnswer struct {
	Offsets []struct {
		Partition int   `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"offsets"`
	Token string `json:"token"`
}

type fetchAnswer struct {
	Records []struct {
		Offset int64           `json:"offset"`
		Value  json.RawMessage `json:"value"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
}

func produceQ(t *testing.T, url, body string) produceAnswer {
	t.Helper()
	a := do(t, "POST", url+"/v1/namespaces/default/streams/q/records", "application/json", body, "")
	if a.status != 200 {
		t.Fatalf("produce to %s: %d %s", url, a.status, a.body)
	}
	var p produceAnswer
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func fetchQ(t *testing.T, url string, query string) fetchAnswer {
	t.Helper()
	a := do(t, "GET", url+"/v1/namespaces/default/streams/q/partitions/0/records?"+query, "", "", "")
	if a.status != 200 {
		t.Fatalf("fetch from %s: %d %s", url, a.status, a.body)
	}
	var f fetchAnswer
	if err := json.Unmarshal(a.body, &f); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	return f
}

func TestQuorumStreamThroughEveryNode(t *testing.T) {
	_, urls := quorumNodes(t)
	if a := do(t, "POST", urls[0]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	// Produce through every node: the two that are not the journal leader forward.
	var want []string
	for i, u := range urls {
		p := produceQ(t, u, fmt.Sprintf(`{"records":[{"value":"a%d"},{"value":"b%d"}]}`, i, i))
		if len(p.Offsets) != 2 || p.Offsets[0].Offset != int64(2*i) || p.Offsets[1].Offset != int64(2*i+1) || p.Token == "" {
			t.Fatalf("produce through node %d: %+v", i, p)
		}
		want = append(want, fmt.Sprintf(`"a%d"`, i), fmt.Sprintf(`"b%d"`, i))
	}
	// Every node serves the same records from its own member; a token makes a node that
	// did not take the produce wait for that commit (read-your-writes).
	p := produceQ(t, urls[2], `{"records":[{"value":"last"}]}`)
	want = append(want, `"last"`)
	for i, u := range urls {
		f := fetchQ(t, u, "offset=0&token="+p.Token)
		var got []string
		for j, r := range f.Records {
			if r.Offset != int64(j) {
				t.Fatalf("node %d: record %d has offset %d", i, j, r.Offset)
			}
			got = append(got, string(r.Value))
		}
		if !reflect.DeepEqual(got, want) || f.HighWatermark != 7 || f.NextOffset != 7 {
			t.Fatalf("node %d fetched %v (hwm %d next %d), want %v", i, got, f.HighWatermark, f.NextOffset, want)
		}
	}
	// A long-poll at the high watermark on one node wakes on a produce through another.
	done := make(chan fetchAnswer, 1)
	go func() { done <- fetchQ(t, urls[1], "offset=7&max_wait_ms=5000") }()
	time.Sleep(100 * time.Millisecond)
	produceQ(t, urls[0], `{"records":[{"value":"woke"}]}`)
	select {
	case f := <-done:
		if len(f.Records) != 1 || string(f.Records[0].Value) != `"woke"` || f.Records[0].Offset != 7 {
			t.Fatalf("long-poll answered %+v", f)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the long-poll did not wake")
	}
	// Past the high watermark: out of range, as for any stream.
	if a := do(t, "GET", urls[1]+"/v1/namespaces/default/streams/q/partitions/0/records?offset=99", "", "", ""); a.status != 416 {
		t.Fatalf("fetch past the high watermark: %d %s", a.status, a.body)
	}
}

func TestQuorumProduceSurvivesLeaderLoss(t *testing.T) {
	nodes, urls := quorumNodes(t)
	if a := do(t, "POST", urls[0]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	produceQ(t, urls[0], `{"records":[{"value":1}]}`)
	leader := -1
	for i, n := range nodes {
		if n.QuorumLeader() {
			leader = i
		}
		// The gauge says the same.
		m := do(t, "GET", urls[i]+"/metrics", "", "", "")
		if want := fmt.Sprintf(`loam_journal_leader{journal="j0"} %d`, map[bool]int{true: 1}[n.QuorumLeader()]); !strings.Contains(string(m.body), want) {
			t.Errorf("node %d /metrics lacks %s", i, want)
		}
	}
	if leader < 0 {
		t.Fatal("no node leads the journal")
	}
	closeNode(nodes[leader])
	nodes[leader] = nil
	other := (leader + 1) % 3
	t0 := time.Now()
	p := produceQ(t, urls[other], `{"records":[{"value":2}]}`)
	if p.Offsets[0].Offset != 1 {
		t.Fatalf("produce after the leader's loss: %+v", p)
	}
	if el := time.Since(t0); el > 3*time.Second {
		t.Fatalf("produce resumed after %v, want within 3 s", el)
	}
	f := fetchQ(t, urls[(leader+2)%3], "offset=0&token="+p.Token)
	if len(f.Records) != 2 {
		t.Fatalf("fetch after failover: %+v", f)
	}
}

// TestQuorumBinaryAndGRPC: the binary produce path and gRPC produce and fetch reach the
// journal too, through nodes other than the one the records are read from.
func TestQuorumBinaryAndGRPC(t *testing.T) {
	nodes, urls := quorumNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gc, err := streamapi.DialGRPC(nodes[1].GRPCAddr(), []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if _, err := gc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "q", Class: "quorum"}); err != nil {
		t.Fatalf("gRPC create of a quorum stream: %v", err)
	}
	bin, err := streamapi.NewClient(urls[0]) // the binary produce path
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf("%q", s)) }
	if r, err := bin.Produce(ctx, "default", "q", []streamapi.Record{{Value: v("bin-0")}, {Value: v("bin-1")}}); err != nil || len(r.Offsets) != 2 || r.Offsets[1].Offset != 1 {
		t.Fatalf("binary produce: %+v %v", r, err)
	}
	r, err := gc.Produce(ctx, "default", "q", []streamapi.Record{{Value: v("grpc-2")}})
	if err != nil || r.Offsets[0].Offset != 2 {
		t.Fatalf("gRPC produce: %+v %v", r, err)
	}
	g2, err := streamapi.DialGRPC(nodes[2].GRPCAddr(), []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	// Without a token a follower may lag its leader by a heartbeat: wait for it.
	var f streamapi.FetchResponse
	for deadline := time.Now().Add(5 * time.Second); ; {
		if f, err = g2.Fetch(ctx, "default", "q", 0, 0, 1<<20, 0); err != nil {
			t.Fatal(err)
		}
		if len(f.Records) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for _, rec := range f.Records {
		got = append(got, fmt.Sprintf("%d:%s", *rec.Offset, rec.Value))
	}
	if want := []string{`0:"bin-0"`, `1:"bin-1"`, `2:"grpc-2"`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("gRPC fetch from a third node: %v, want %v", got, want)
	}
}

// TestQuorumKeepsArrowStreams: serving the quorum class leaves the other APIs of the
// metastore client reachable (arrow streams store their schemas through it).
func TestQuorumKeepsArrowStreams(t *testing.T) {
	_, urls := quorumNodes(t)
	body := `{"name":"a","encoding":"arrow","schema":{"fields":[{"name":"x","type":"int64"}]}}`
	if a := do(t, "POST", urls[0]+"/v1/namespaces/default/streams", "application/json", body, ""); a.status != 201 {
		t.Fatalf("create an arrow stream on a node serving quorum: %d %s", a.status, a.body)
	}
}

// TestQuorumCloseAnswersOpenPolls: Close answers an open long-poll of a quorum partition at
// once instead of holding the shutdown for its wait.
func TestQuorumCloseAnswersOpenPolls(t *testing.T) {
	nodes, urls := quorumNodes(t)
	if a := do(t, "POST", urls[0]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	produceQ(t, urls[1], `{"records":[{"value":1}]}`)
	done := make(chan int, 1)
	go func() {
		a := do(t, "GET", urls[1]+"/v1/namespaces/default/streams/q/partitions/0/records?offset=1&max_wait_ms=30000", "", "", "")
		done <- a.status
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	closeNode(nodes[1])
	nodes[1] = nil
	select {
	case st := <-done:
		if st != 200 {
			t.Fatalf("the open poll answered %d", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the open poll was not answered within 5 s of Close")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v with a quorum poll open", took)
	}
}

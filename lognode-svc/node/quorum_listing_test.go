package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
)

// TestQuorumListingShowsJournalHighWatermark: a quorum stream's listing shows its
// partitions' high watermarks in the journal, on every node (the sequencer's index, which
// ends at the last offloaded segment, is behind it).
func TestQuorumListingShowsJournalHighWatermark(t *testing.T) {
	_, urls := quorumNodes(t)
	if a := do(t, "POST", urls[0]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	p := produceQ(t, urls[0], `{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}`)
	for i, u := range urls {
		fetchQ(t, u, "offset=0&token="+p.Token) // the node's member applied the commit
		a := do(t, "GET", u+"/v1/namespaces/default/streams/q", "", "", "")
		if a.status != 200 || !strings.Contains(string(a.body), `"high_watermark":3`) {
			t.Fatalf("node %d: GET stream: %d %s, want high_watermark 3", i, a.status, a.body)
		}
	}
}

// TestQuorumKafkaListOffsetsLatest: Kafka ListOffsets (latest) of a quorum topic answers
// the journal's high watermark.
func TestQuorumKafkaListOffsetsLatest(t *testing.T) {
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	var voters []node.JournalVoter
	for i := 0; i < 3; i++ {
		voters = append(voters, node.JournalVoter{ID: fmt.Sprintf("k-%d", i), Addr: freeAddr(t)})
	}
	base := t.TempDir()
	var nodes []*node.Node
	for i, v := range voters {
		n, err := node.Start(context.Background(), node.Config{NodeID: v.ID, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 5 * time.Millisecond, Logger: quiet(),
			Quorum: node.QuorumConfig{Addr: v.Addr, Dir: fmt.Sprintf("%s/%d", base, i), Voters: voters, NoSync: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeNode(n) })
		nodes = append(nodes, n)
	}
	url := "http://" + nodes[0].Addr()
	if a := do(t, "POST", url+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	p := produceQ(t, url, `{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}`)
	for i, n := range nodes {
		fetchQ(t, "http://"+n.Addr(), "offset=0&token="+p.Token)
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "q"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 3 {
			t.Fatalf("node %d: ListOffsets latest: code %d offset %d, want 3", i, got.ErrorCode, got.Offset)
		}
	}
}

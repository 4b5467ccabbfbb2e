package node_test

import (
	"strings"
	"testing"
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

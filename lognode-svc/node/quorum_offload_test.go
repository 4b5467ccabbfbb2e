package node_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// TestQuorumOffloadColdFetchAcrossBoundary: three member nodes offload a quorum
// partition's sealed ranges to segments in a real bucket (objstore.FS) and trim their
// journals; a fourth node, not a member, with fresh caches, reads every record across the
// segment/journal boundary, identical to what was produced, and the stream's listing
// shows the journal's high watermark.
func TestQuorumOffloadColdFetchAcrossBoundary(t *testing.T) {
	mc := startSequencer(t)
	bucket, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var voters []node.JournalVoter
	for i := 0; i < 3; i++ {
		voters = append(voters, node.JournalVoter{ID: fmt.Sprintf("q-%d", i), Addr: freeAddr(t)})
	}
	base := t.TempDir()
	start := func(id, addr, dir string) string {
		n, err := node.Start(context.Background(), node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 5 * time.Millisecond, Logger: quiet(),
			Quorum: node.QuorumConfig{Addr: addr, Dir: dir, Voters: voters, NoSync: true,
				OffloadBytes: 1 << 20, OffloadAge: time.Second, Offload: journal.OffloadConfig{Interval: 50 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeNode(n) })
		return "http://" + n.Addr()
	}
	var urls []string
	for i, v := range voters {
		urls = append(urls, start(v.ID, v.Addr, fmt.Sprintf("%s/%d", base, i)))
	}
	if a := do(t, "POST", urls[0]+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create quorum stream: %d %s", a.status, a.body)
	}
	st, _, err := mc.GetStream(context.Background(), meta.DefaultNS, "q")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	total := int64(0)
	produce := func(n int) {
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("v%03d", total/2)
			produceQ(t, urls[i%3], fmt.Sprintf(`{"records":[{"value":"%s-a"},{"value":"%s-b"}]}`, v, v))
			want = append(want, fmt.Sprintf(`%d:"%s-a"`, total, v), fmt.Sprintf(`%d:"%s-b"`, total+1, v))
			total += 2
		}
	}
	seqHWM := func() int64 {
		_, ps, err := mc.Lookup(context.Background(), st.ID, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ps.HighWatermark
	}
	// Produce until a segment is committed, then more, which stay in the journal for the
	// offload age (a second): the boundary lies inside the stream.
	produce(20)
	deadline := time.Now().Add(20 * time.Second)
	for seqHWM() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing offloaded within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	boundary := seqHWM()
	produce(10)
	if h := seqHWM(); h >= total {
		t.Fatalf("everything offloaded already (%d of %d): no boundary to read across", h, total)
	}

	// The cold node: not a member, fresh caches.
	cold := start("cold", freeAddr(t), "")
	var got []string
	for off := int64(0); off < total; {
		f := fetchQ(t, cold, fmt.Sprintf("offset=%d&max_bytes=200", off))
		if len(f.Records) == 0 {
			t.Fatalf("cold fetch at %d: no records (hwm %d)", off, f.HighWatermark)
		}
		if f.HighWatermark != total {
			t.Fatalf("cold fetch at %d: high watermark %d, want %d", off, f.HighWatermark, total)
		}
		for _, r := range f.Records {
			if r.Offset >= off {
				got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
			}
		}
		off = f.NextOffset
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cold node read (boundary %d):\n got %v\nwant %v", boundary, got, want)
	}
	// The listing shows the journal's high watermark, on a member and on the cold node.
	for _, u := range []string{urls[1], cold} {
		a := do(t, "GET", u+"/v1/namespaces/default/streams/q", "", "", "")
		if a.status != 200 || !strings.Contains(string(a.body), fmt.Sprintf(`"high_watermark":%d`, total)) {
			t.Fatalf("GET stream on %s: %d %s, want high_watermark %d", u, a.status, a.body, total)
		}
	}
	// The rest is offloaded in its turn (by age); the segments hold every record.
	deadline = time.Now().Add(20 * time.Second)
	for seqHWM() < total {
		if time.Now().After(deadline) {
			t.Fatalf("offloaded %d of %d within 20 s", seqHWM(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got = got[:0]
	for off := int64(0); off < total; {
		f := fetchQ(t, urls[2], fmt.Sprintf("offset=%d", off))
		for _, r := range f.Records {
			if r.Offset >= off {
				got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
			}
		}
		if f.NextOffset <= off {
			t.Fatalf("fetch at %d did not advance: %+v", off, f)
		}
		off = f.NextOffset
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("member read after offload:\n got %v\nwant %v", got, want)
	}
}

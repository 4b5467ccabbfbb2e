package httpapi_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestConsumerMembers: streamapi.Consumer members on a real node and sequencer. Two members
// share four partitions (two each) and together read every record; a member that stops
// without leaving (a crash) loses its leases at its session's end and a new member resumes
// at the committed offsets: every record is read, none skipped.
func TestConsumerMembers(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := streamapi.NewClient(n.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	four := int32(4)
	if _, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "s", Partitions: &four}); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		var recs []streamapi.Record
		for i := from; i < to; i++ {
			p := int32(i % 4)
			recs = append(recs, streamapi.Record{Partition: &p, Value: []byte(fmt.Sprint(i))})
		}
		if _, err := c.Produce(ctx, "default", "s", recs); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 200)
	const session = 600 * time.Millisecond
	newMember := func(name string) *streamapi.Consumer {
		m, err := c.NewConsumer("default", "app", "s", streamapi.ConsumerOptions{Member: name, Session: session, MaxWait: 50 * time.Millisecond, MaxBytes: 256})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var mu sync.Mutex
	seen := map[string]int{}
	byMember := map[string]map[int32]bool{}
	first := map[string]map[int32]int64{} // member → partition → first offset read
	// read polls m until stop is closed, recording what it reads.
	read := func(m *streamapi.Consumer, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs, err := m.Poll(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, r := range recs {
				seen[string(r.Value)]++
				if byMember[m.Member()] == nil {
					byMember[m.Member()] = map[int32]bool{}
				}
				byMember[m.Member()][*r.Partition] = true
				if first[m.Member()] == nil {
					first[m.Member()] = map[int32]int64{}
				}
				if _, ok := first[m.Member()][*r.Partition]; !ok {
					first[m.Member()][*r.Partition] = *r.Offset
				}
			}
			mu.Unlock()
		}
	}
	waitAll := func(total int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got >= total {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("read %d distinct records of %d", len(seen), total)
	}
	a, b := newMember("a"), newMember("b")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go read(a, stop, &wg)
	go read(b, stop, &wg)
	waitAll(200)
	// Within two sessions each holds two of the four.
	time.Sleep(2 * session)
	if la, lb := len(a.Leases()), len(b.Leases()); la != 2 || lb != 2 {
		t.Errorf("leases: a %d, b %d", la, lb)
	}
	close(stop)
	wg.Wait()
	// a leaves cleanly (commits, releases); b crashes: it commits nothing more and never leaves.
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	produce(200, 300)
	d := newMember("d")
	stop = make(chan struct{})
	wg.Add(1)
	go read(d, stop, &wg)
	waitAll(300)
	close(stop)
	wg.Wait()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 300 {
		if seen[fmt.Sprint(i)] == 0 {
			t.Errorf("record %d never read", i)
		}
	}
	// d resumed each partition at its committed offset (50: the first 200 records, four ways).
	for p := range int32(4) {
		if off, ok := first["d"][p]; !ok || off != 50 {
			t.Errorf("d started partition %d at %d (read: %v), want the committed 50", p, off, ok)
		}
	}
	if len(byMember["d"]) != 4 {
		t.Errorf("d read partitions %v, want all four once b's leases ended", byMember["d"])
	}
	// Committed offsets are the high watermarks: nothing is left to read.
	desc, err := c.DescribeConsumer(ctx, "default", "app")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Partitions {
		if p.Lag != 0 || p.Committed != 75 {
			t.Errorf("partition %d: committed %d lag %d", p.Partition, p.Committed, p.Lag)
		}
	}
}

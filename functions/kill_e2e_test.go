package functions_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/gc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/streamapi"
)

// The child process of TestSegmenterKilled: a segmenter that reaches the sequencer over
// gRPC and the bucket's directory, and stops dead right after its segment PUT.
func TestMain(m *testing.M) {
	if os.Getenv("LOAM_SEGMENTER_CHILD") == "1" {
		segmenterChild()
		return
	}
	os.Exit(m.Run())
}

func segmenterChild() {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	fs, err := objstore.NewFS(os.Getenv("LOAM_BUCKET_DIR"))
	if err != nil {
		fail(err)
	}
	mc, err := metagrpc.Dial(ctx, []string{os.Getenv("LOAM_SEQUENCER")})
	if err != nil {
		fail(err)
	}
	stream, _ := strconv.ParseUint(os.Getenv("LOAM_STREAM"), 10, 64)
	s, err := segmenter.New(segmenter.Config{Bucket: stallAfterPut{fs}, Meta: mc, TargetBytes: 1 << 20, MaxAge: time.Millisecond,
		LeaseTTL: 2 * time.Second, Holder: "child", Logger: quiet()})
	if err != nil {
		fail(err)
	}
	_, err = s.Partition(ctx, stream, 0)
	fail(fmt.Errorf("segmenter returned: %v", err))
}

// stallAfterPut announces a segment PUT on stdout and then never returns.
type stallAfterPut struct{ objstore.Bucket }

func (b stallAfterPut) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	if err := b.Bucket.Put(ctx, key, body, opts...); err != nil {
		return err
	}
	if strings.HasPrefix(key, "seg/") {
		fmt.Println("PUT", key)
		select {}
	}
	return nil
}

// TestSegmenterKilled: a segmenter process killed (SIGKILL) after writing its segment but
// before its swap leaves the index untouched and its object unreferenced; the next
// invocation completes the work once the dead one's lease lapses; gc's orphan sweep deletes
// the dead one's object.
func TestSegmenterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, fs, 2*time.Millisecond)
	st := c.createStream(streamapi.CreateStreamRequest{Name: "k"})
	c.produce("k", 0, "x", 10, 10, 100)
	before := fetchAll(t, c.api, "k", 0, 0)
	esBefore, _ := c.entries(st, 0)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOAM_SEGMENTER_CHILD=1", "LOAM_BUCKET_DIR="+dir, "LOAM_SEQUENCER="+c.rpcAddr,
		"LOAM_STREAM="+strconv.FormatUint(st.ID, 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "PUT ") || strings.HasPrefix(sc.Text(), "ERR ") {
				line <- sc.Text()
				return
			}
		}
		line <- "EOF"
	}()
	var orphan string
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "PUT ") {
			cmd.Process.Kill()
			t.Fatalf("child: %s", l)
		}
		orphan = strings.TrimPrefix(l, "PUT ")
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child did not reach its PUT")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// The index is untouched and nothing references the dead segmenter's object.
	es, _ := c.entries(st, 0)
	if wal, segs := kinds(es); segs != 0 || wal != len(esBefore) {
		t.Fatalf("after the kill: %d WAL entries, %d segments", wal, segs)
	}
	if refd, err := c.meta.Referenced(ctx, []string{orphan}); err != nil || refd[0] {
		t.Fatalf("the killed segmenter's object is referenced (%v, %v)", refd, err)
	}
	sameRecords(t, "after the kill", fetchAll(t, c.api, "k", 0, 0), before)

	// The next invocation waits for the dead holder's lease, then completes.
	s, _ := segmenter.New(segmenter.Config{Bucket: fs, Meta: c.meta, TargetBytes: 1 << 20, MaxAge: time.Millisecond, Holder: "next", Logger: quiet()})
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := s.Partition(ctx, st.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Segments == 1 {
			break
		}
		if !res.Busy || time.Now().After(deadline) {
			t.Fatalf("next invocation: %+v", res)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, cold := c.startNode("n2", time.Millisecond)
	sameRecords(t, "after the next invocation", fetchAll(t, cold, "k", 0, 0), before)

	// GC: the orphan is found once it is older than OrphanAge (the clock is moved on so the
	// test need not wait out the writer budget) and goes once it stayed an orphan for Grace,
	// at the next sweep; the segment in use stays.
	now := time.Now().Add(5 * time.Minute)
	g, _ := gc.New(gc.Config{Bucket: fs, Meta: c.meta, Coord: c.coord, Grace: time.Minute, OrphanAge: meta.WriterBudget + time.Minute,
		OrphanInterval: time.Minute, Now: func() time.Time { return now }, Logger: quiet()})
	gst, err := g.Run(ctx)
	if err != nil || gst.Orphans != 0 || gst.OrphansWaiting != 1 {
		t.Fatalf("gc, first sighting: %+v %v", gst, err)
	}
	now = now.Add(time.Minute)
	gst, err = g.Run(ctx)
	if err != nil || gst.Orphans != 1 {
		t.Fatalf("gc: %+v %v", gst, err)
	}
	if _, err := fs.Stat(ctx, orphan); err == nil {
		t.Fatal("orphan still there")
	}
	segs := listKeys(t, fs, "seg/")
	if len(segs) != 1 {
		t.Fatalf("segments left: %v", segs)
	}
	sameRecords(t, "after gc", fetchAll(t, cold, "k", 0, 0), before)
}

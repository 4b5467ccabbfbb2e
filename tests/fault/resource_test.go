package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/cluster"
)

// mountTmpfs mounts a tmpfs of size at dir (made), or skips the test where mounting is
// refused; it is unmounted (lazily: a child may still hold it) when the test ends.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := tryTmpfs(t, dir, size); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root and mount rights): %v", err)
	}
}

// tryTmpfs mounts a tmpfs of size at dir (made), unmounted when the test ends, or says why
// it could not.
func tryTmpfs(t *testing.T, dir, size string) error {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return nil
}

// fill writes a file in dir until the filesystem has no space left, and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	// Take the last blocks too.
	small := make([]byte, 4096)
	for {
		if _, err := f.Write(small); err != nil {
			break
		}
	}
	var st syscall.Statfs_t
	syscall.Statfs(dir, &st)
	t.Logf("%s full: %d bytes free", dir, st.Bavail*uint64(st.Bsize))
	return path
}

// TestSequencerDiskFull: one voter's data directory (Raft log, snapshots, state) is a
// 64 MiB tmpfs that fills under load, then space returns. The other two voters keep the
// group going; the full voter must not corrupt its state and must catch up once space
// returns; the checker stays clean. The full voter stops at the first write its state
// cannot take (a panic naming "no space left on device": a state machine must not skip
// an entry) and the supervisor restarts it until space returns; that line is expected.
func TestSequencerDiskFull(t *testing.T) {
	var voterDir string
	e := start(t, 3, 2, "disk", 4, cluster.Options{Prepare: func(dir string) {
		voterDir = filepath.Join(dir, "seq-3")
		mountTmpfs(t, voterDir, "64m")
	}})
	l := cluster.NewLedger()
	load := e.load(l)
	time.Sleep(time.Second)
	filler := fill(t, voterDir)
	from := time.Now()
	time.Sleep(2 * faultWindow())
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	fired := e.c.CountInLogs("seq-3", "no space left on device")
	rec := recovery(t, l, end, 30*time.Second)
	// The full voter catches up with the leader once space returns (restarted by the
	// supervisor if it exited).
	leader := e.c.WaitLeader(15 * time.Second)
	want, err := e.c.AppliedIndex(context.Background(), leader.RPC)
	if err != nil {
		t.Fatal(err)
	}
	var rpc string
	for _, s := range e.c.File().Sequencers {
		if s.ID == "seq-3" {
			rpc = s.RPC
		}
	}
	catchUp := e.c.WaitApplied(rpc, want, 60*time.Second)
	during := countOutcomes(l, from, end)
	rep := e.finish(load, l, "no space left on device")
	t.Logf("FIGURE disk_full voter seq-3 (64 MiB tmpfs): ENOSPC lines in its log=%d; during: %s; recovery %s; caught up %s after space returned; lost: none (%d acknowledged attempts all present)",
		fired, during, rec.Round(time.Millisecond), catchUp.Round(time.Millisecond), rep.Acked)
	if during.Acked*2 < during.total() {
		t.Fatalf("%s acknowledged while one voter's disk was full, want at least half", during)
	}
}

// TestHugeRequests: under the normal load, other clients send produce requests over the
// body limit (with a Content-Length and chunked), and a burst of requests just under it.
// Over the limit is refused with request_too_large, the burst is acknowledged or refused
// cleanly, the node's memory stays bounded, and the checker stays clean.
func TestHugeRequests(t *testing.T) {
	e := start(t, 1, 2, "load", 4, cluster.Options{})
	ctx := context.Background()
	if _, err := e.c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "huge", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	l := cluster.NewLedger()
	load := e.load(l)
	node := e.c.NodeURLs()[0]
	url := node + "/v1/namespaces/" + ns + "/streams/huge/records"
	big := bytes.Repeat([]byte("x"), 20<<20)
	// Over the limit, announced.
	res, err := http.Post(url, "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "request_too_large") {
		t.Fatalf("20 MiB with Content-Length: %d %s", res.StatusCode, body)
	}
	// Over the limit, chunked (no Content-Length): cut at the limit.
	res, err = http.Post(url, "application/json", io.MultiReader(bytes.NewReader(big)))
	if err == nil {
		body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("20 MiB chunked: %d %s", res.StatusCode, body)
		}
	}
	// A burst of 24 requests of about 7 MiB at once (8 records of 896 KiB).
	value, _ := json.Marshal(strings.Repeat("v", 896<<10))
	recs := make([]streamapi.Record, 8)
	for i := range recs {
		recs[i] = streamapi.Record{Value: value}
	}
	var mu sync.Mutex
	outcome := map[string]int{}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.c.Client(i%2).Produce(ctx, ns, "huge", recs)
			k := "acked"
			if err != nil {
				k = fmt.Sprintf("%s", streamapi.ErrorCode(err))
				if k == "" {
					k = err.Error()
				}
			}
			mu.Lock()
			outcome[k]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	rss := scrape(node, "process_resident_memory_bytes", "")
	rep := e.finish(load, l)
	t.Logf("FIGURE huge_requests: 20 MiB refused (413 request_too_large, announced and chunked); burst of 24 × 7 MiB: %v; node RSS after %.0f MiB; lost: none (%d acknowledged attempts all present)",
		outcome, rss/(1<<20), rep.Acked)
	if outcome["acked"] == 0 {
		t.Fatalf("no request of the burst was acknowledged: %v", outcome)
	}
	if rss > 1.5*(1<<30) {
		t.Fatalf("node RSS %.0f MiB after the burst", rss/(1<<20))
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// TestDevStopsPromptlyWithOpenPoll: SIGTERM to `loam dev` while a 60 s long-poll is open
// answers the poll at once with what it has and exits well inside ECS's 30 s stop timeout.
func TestDevStopsPromptlyWithOpenPoll(t *testing.T) {
	p := startDev(t, t.TempDir(), freePorts(t), nil)
	resp, err := http.Post(p.http+"/v1/namespaces/default/streams", "application/json", strings.NewReader(`{"name":"poll"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create stream: %d", resp.StatusCode)
	}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	polled := make(chan answer, 1)
	go func() {
		resp, err := http.Get(p.http + "/v1/namespaces/default/streams/poll/partitions/0/records?offset=0&max_wait_ms=60000")
		if err != nil {
			polled <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		polled <- answer{status: resp.StatusCode, body: b, err: err}
	}()
	time.Sleep(time.Second) // the poll is open and waiting
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.stop(ctx); err != nil {
		t.Fatal(err)
	}
	exit := time.Since(start)
	t.Logf("loam dev exited %v after SIGTERM with a 60 s long-poll open", exit.Round(time.Millisecond))
	a := <-polled
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("the open poll got %d %s %v, want 200 with no records", a.status, a.body, a.err)
	}
	var fr streamapi.FetchResponse
	if err := json.Unmarshal(a.body, &fr); err != nil || len(fr.Records) != 0 {
		t.Fatalf("poll answer %s: %v", a.body, err)
	}
	if exit > 10*time.Second {
		t.Fatal(fmt.Sprintf("exit took %v, want under 10 s", exit))
	}
}

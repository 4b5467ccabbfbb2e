package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// freePorts finds n consecutive free loopback ports, below the ephemeral range (32768):
// one free in it now may be taken by an outgoing connection before it is listened on.
// They come from 26000-26999, a range no other package's tests draw from.
func freePorts(t *testing.T, n int) int {
	for try := 0; try < 100; try++ {
		base := 26000 + rand.IntN(1000-n)
		ok := true
		for i := 0; i < n && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free ports")
	return 0
}

func TestQuorumStreamInProcess(t *testing.T) {
	dir := t.TempDir()
	port := freePorts(t, 3)
	run := func() (*Cluster, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := Start(context.Background(), Config{DataDir: dir, HTTPListener: ln, FlushInterval: 5 * time.Millisecond,
			SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Functions: FunctionsConfig{Disabled: true}, Quorum: QuorumConfig{Port: port}})
		if err != nil {
			t.Fatal(err)
		}
		return c, "http://" + c.HTTPAddr()
	}
	post := func(url, body string) (int, string) {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fetch := func(url string) (vals []string) {
		resp, err := http.Get(url + "/v1/namespaces/default/streams/q/partitions/0/records?offset=0")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var f struct {
			Records []struct {
				Offset int64           `json:"offset"`
				Value  json.RawMessage `json:"value"`
			} `json:"records"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records {
			vals = append(vals, fmt.Sprintf("%d=%s", r.Offset, r.Value))
		}
		return vals
	}
	c, url := run()
	if code, body := post(url+"/v1/namespaces/default/streams", `{"name":"q","class":"quorum"}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := post(url+"/v1/namespaces/default/streams/q/records", `{"records":[{"value":"a"},{"value":"b"}]}`); code != 200 {
		t.Fatalf("produce: %d %s", code, body)
	}
	if got := fetch(url); strings.Join(got, ",") != `0="a",1="b"` {
		t.Fatalf("fetch: %v", got)
	}
	c.Close(context.Background())
	// A restart keeps the journal: its logs are on disk under the data directory.
	c, url = run()
	defer c.Close(context.Background())
	if code, body := post(url+"/v1/namespaces/default/streams/q/records", `{"records":[{"value":"c"}]}`); code != 200 || !strings.Contains(body, `"offset":2`) {
		t.Fatalf("produce after restart: %d %s", code, body)
	}
	if got := fetch(url); strings.Join(got, ",") != `0="a",1="b",2="c"` {
		t.Fatalf("fetch after restart: %v", got)
	}
}

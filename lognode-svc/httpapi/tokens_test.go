package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// startPeer starts another real log node on the sequencer mc and bucket b.
func startPeer(t testing.TB, id string, mc meta.Client, b objstore.Bucket, lim httpapi.Limits) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: id, Listener: ln, Bucket: b, Meta: mc,
		FlushInterval: 5 * time.Millisecond, Limits: lim, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return srv
}

// TestTokenReadYourWritesAcrossNodes: every record produced through node A is in the
// answer of a fetch through node B that presents A's token, with no max wait. B tracks the
// partition (it fetched it before), so without the token it may answer from a state its
// watch has not advanced yet: B's watch events arrive 30 ms late.
func TestTokenReadYourWritesAcrossNodes(t *testing.T) {
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	a := startPeer(t, "tok-a", mc, bucket, httpapi.Limits{})
	b := startPeer(t, "tok-b", slowWatch{mc, 30 * time.Millisecond}, bucket, httpapi.Limits{})
	if r := call(t, "POST", a.URL+"/v1/namespaces/default/streams", `{"name":"t","partitions":1}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	recs := "/v1/namespaces/default/streams/t/records"
	fetchB := b.URL + "/v1/namespaces/default/streams/t/partitions/0/records"
	for i := range 50 {
		// B tracks the partition at its current high watermark.
		if r := call(t, "GET", fmt.Sprintf("%s?offset=%d", fetchB, i), ""); r.status != 200 {
			t.Fatalf("fetch %d: %d %s", i, r.status, r.body)
		}
		r := call(t, "POST", a.URL+recs, fmt.Sprintf(`{"records":[{"value":%d}]}`, i))
		if r.status != 200 {
			t.Fatalf("produce %d: %d %s", i, r.status, r.body)
		}
		var pr streamapi.ProduceResponse
		if err := json.Unmarshal(r.body, &pr); err != nil {
			t.Fatal(err)
		}
		if pr.Offsets[0].Offset != int64(i) || !strings.HasPrefix(pr.Token, "v1.") {
			t.Fatalf("produce %d answered %s", i, r.body)
		}
		f := call(t, "GET", fmt.Sprintf("%s?offset=%d&token=%s", fetchB, i, pr.Token), "")
		var fr struct {
			Records []struct {
				Offset int64 `json:"offset"`
				Value  int   `json:"value"`
			} `json:"records"`
		}
		if f.status != 200 || json.Unmarshal(f.body, &fr) != nil || len(fr.Records) != 1 || fr.Records[0].Value != i {
			t.Fatalf("fetch %d through B with token %s: %d %s", i, pr.Token, f.status, f.body)
		}
	}
}

// slowWatch delivers each watch event late, as a node whose watch lags does.
type slowWatch struct {
	meta.Client
	delay time.Duration
}

func (s slowWatch) Watch(ctx context.Context, from uint64, fn func(meta.Event) error) error {
	return s.Client.Watch(ctx, from, func(ev meta.Event) error {
		time.Sleep(s.delay)
		return fn(ev)
	})
}

// TestTokenMalformed: a token that is not v1.<index> is a 400 naming the parameter.
func TestTokenMalformed(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	if r := call(t, "POST", n.srv.URL+"/v1/namespaces/default/streams", `{"name":"t","partitions":1}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, tok := range []string{"x", "v1.", "v2.5", "v1.-1", "v1.abc", "v1.007", "v1.99999999999999999999999"} {
		r := call(t, "GET", n.srv.URL+"/v1/namespaces/default/streams/t/partitions/0/records?token="+tok, "")
		if r.status != 400 || !strings.Contains(r.detail(t).Message, "token") {
			t.Fatalf("token %q: %d %s", tok, r.status, r.body)
		}
	}
}

func TestParseToken(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{{"v1.0", 0, true}, {"v1.1", 1, true}, {"v1.18446744073709551615", 1<<64 - 1, true},
		{"v1.18446744073709551616", 0, false}, {"v1.+1", 0, false}, {"V1.1", 0, false}, {"v1.1 ", 0, false}, {"", 0, false}} {
		got, err := httpapi.ParseToken(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseToken(%q) = %d, %v", c.in, got, err)
		}
	}
}

// FuzzParseToken: never panics; what it accepts formats back to the same text.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"v1.0", "v1.42", "v1.18446744073709551615", "v1.", "v1.-1", "v1.01", "v2.1", "", "v1.1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := httpapi.ParseToken(s)
		if err != nil {
			if !strings.Contains(err.Error(), "consistency token") {
				t.Fatalf("error %q does not name the token", err)
			}
			return
		}
		if httpapi.FormatToken(n) != s {
			t.Fatalf("ParseToken(%q) = %d, which formats as %q", s, n, httpapi.FormatToken(n))
		}
	})
}

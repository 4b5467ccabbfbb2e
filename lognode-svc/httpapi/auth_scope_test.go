package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/loamhq/loam/lognode-svc/auth"
)

func TestAuthScope(t *testing.T) {
	for _, c := range []struct {
		method, target string
		want           auth.Scope
		open           bool
	}{
		{"GET", "/healthz", auth.Scope{}, true},
		{"GET", "/metrics", auth.Scope{}, true},
		{"GET", "/v1/namespaces", auth.Scope{Admin: true}, false},
		{"POST", "/v1/namespaces/", auth.Scope{Admin: true}, false},
		{"DELETE", "/v1/namespaces/team-a", auth.Scope{Admin: true}, false},
		{"GET", "/v1/keys", auth.Scope{Admin: true}, false},
		{"DELETE", "/v1/keys/abc", auth.Scope{Admin: true}, false},
		{"GET", "/v1/namespaces/team-a/streams", auth.Scope{Namespace: "team-a"}, false},
		{"POST", "/v1/namespaces/team-a/streams/s/records", auth.Scope{Namespace: "team-a"}, false},
		{"GET", "/v1/namespaces/team%2Da/streams", auth.Scope{Namespace: "team-a"}, false},
		{"GET", "/v1/namespaces/a%2Fb/streams", auth.Scope{Namespace: "a/b"}, false},
		{"GET", "/v1/cluster/nodes", auth.Scope{}, false},
		{"GET", "/healthz/x", auth.Scope{}, false},
	} {
		got, open := authScope(httptest.NewRequest(c.method, c.target, nil))
		if got != c.want || open != c.open {
			t.Errorf("%s %s: scope %+v open %v; want %+v %v", c.method, c.target, got, open, c.want, c.open)
		}
	}
}

// FuzzAuthScope: whatever the path, the namespace the key check authorizes is the one the
// mux hands the route (PathValue "ns"), and a namespace route never goes unchecked.
func FuzzAuthScope(f *testing.F) {
	for _, s := range []string{"/v1/namespaces/a/streams", "/v1/namespaces/a%2Fb/streams/s", "/v1/namespaces/%61/streams",
		"/v1/namespaces/a/../b/streams", "/v1/namespaces//streams", "/v1/namespaces/a/streams/s/partitions/0/records",
		"/v1/namespaces/a/producers", "/v1/keys/x", "/healthz", "/v1/namespaces/%zz/streams"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		r, err := http.NewRequest("GET", "http://x"+path, nil)
		if err != nil || r.URL.Path == "" || r.URL.Host != "x" {
			return
		}
		scope, open := authScope(r)
		mux := http.NewServeMux()
		var routed, ns string
		for _, p := range []string{"/v1/namespaces/{ns}/streams", "/v1/namespaces/{ns}/streams/{stream}",
			"/v1/namespaces/{ns}/streams/{stream}/records", "/v1/namespaces/{ns}/streams/{stream}/partitions/{p}/records",
			"/v1/namespaces/{ns}/producers", "/v1/namespaces/{ns}"} {
			mux.HandleFunc(p, func(_ http.ResponseWriter, r *http.Request) { routed, ns = p, r.PathValue("ns") })
		}
		mux.ServeHTTP(httptest.NewRecorder(), r)
		switch {
		case routed == "":
		case open:
			t.Fatalf("%q: routed to %s without a key check", path, routed)
		case routed == "/v1/namespaces/{ns}":
			if !scope.Admin {
				t.Fatalf("%q: the namespace itself needs admin, scope %+v", path, scope)
			}
		case !scope.Admin && scope.Namespace != ns:
			t.Fatalf("%q: checked namespace %q, the route serves %q", path, scope.Namespace, ns)
		}
	})
}

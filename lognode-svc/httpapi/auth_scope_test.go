package httpapi

import (
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

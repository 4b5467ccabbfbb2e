package streamapitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/streamapi"
)

// Golden vectors of Kafka's UtilsTest.testMurmur2: keyed records must land where a Kafka
// client would put them.
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(murmur2([]byte(c.in))); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Every answer outside 2xx is the error JSON, routes and methods included.
func TestErrorAnswers(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/nope", "", 404, streamapi.CodeNotFound},
		{"PUT", "/v1/namespaces/default/streams", "", 405, streamapi.CodeMethodNotAllowed},
		{"GET", "/v1/namespaces/other/streams", "", 404, streamapi.CodeNamespaceNotFound},
		{"POST", "/v1/namespaces/default/streams", `{"name":"a"} x`, 400, streamapi.CodeInvalidJSON},
		{"POST", "/v1/namespaces/default/streams", `{"name":"a","bogus":1}`, 400, streamapi.CodeInvalidJSON},
		{"POST", "/v1/namespaces/default/streams", `{"name":"a b"}`, 400, streamapi.CodeInvalidArgument},
		{"POST", "/v1/namespaces/default/streams", `{"name":"a","class":"gold"}`, 400, streamapi.CodeInvalidArgument},
		{"POST", "/v1/namespaces/default/streams", `{"name":"a","class":"express"}`, 400, streamapi.CodeUnsupportedClass},
		{"GET", "/v1/namespaces/default/streams/a/partitions/x/records?offset=0", "", 400, streamapi.CodeBadRequest},
		{"POST", "/v1/namespaces/default/streams/a/records", `{"records":[{"value":1}]}`, 404, streamapi.CodeStreamNotFound},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb streamapi.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil || resp.StatusCode != c.status || eb.Error.Code != c.code {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, resp.StatusCode, b, c.status, c.code)
		}
	}
}

// The fake passes the same conformance suite as the log node's real server.
func TestConformance(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	Conformance(t, srv.URL)
}

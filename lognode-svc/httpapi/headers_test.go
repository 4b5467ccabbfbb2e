package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
)

// TestHeadersAsKafkaHasThem: record headers keep their order, repeated keys, binary values
// and null values through produce and fetch; the object form keeps the order written.
// (Headers used to travel as a JSON object: sorted by name, one value per name, values as
// text, no null.) Raw JSON on both sides, so no client type hides what travels.
func TestHeadersAsKafkaHasThem(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"h"}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, body := range []string{
		`{"records":[{"value":1,"headers":{"z":"1","a":"2"}}]}`,
		`{"records":[{"value":2,"headers":[{"key":"k","value":"v"},{"key":"k","value_base64":"AP8="},{"key":"n","value":null},{"key_base64":"/w==","value":"x"}]}]}`,
	} {
		if r := call(t, "POST", base+"/h/records", body); r.status != http.StatusOK {
			t.Errorf("produce %s: %d %s", body, r.status, r.body)
		}
	}
	r := call(t, "GET", base+"/h/partitions/0/records?offset=0", "")
	if r.status != http.StatusOK {
		t.Fatalf("fetch: %d %s", r.status, r.body)
	}
	for _, want := range []string{
		`"headers":[{"key":"z","value":"1"},{"key":"a","value":"2"}]`,
		`"headers":[{"key":"k","value":"v"},{"key":"k","value_base64":"AP8="},{"key":"n","value":null},{"key_base64":"/w==","value":"x"}]`,
	} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("fetch answer lacks %s:\n%s", want, r.body)
		}
	}
}

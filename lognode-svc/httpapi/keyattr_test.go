package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestStreamKeyAttribute: key_attribute is set at create, answered by get and list,
// replaced and cleared by PATCH, and a bad value is a 400 invalid_argument naming the
// field that leaves the stream as it was.
func TestStreamKeyAttribute(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	stream := func(r httpReply, status int) streamapi.Stream {
		t.Helper()
		if r.status != status {
			t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
		}
		var st streamapi.Stream
		if err := json.Unmarshal(r.body, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := stream(call(t, "POST", base, `{"name":"logs","key_attribute":"service.name"}`), 201); st.KeyAttribute != "service.name" {
		t.Fatalf("create answered key_attribute %q", st.KeyAttribute)
	}
	if st := stream(call(t, "GET", base+"/logs", ""), 200); st.KeyAttribute != "service.name" {
		t.Fatalf("get answered key_attribute %q", st.KeyAttribute)
	}
	r := call(t, "POST", base, `{"name":"plain"}`)
	if st := stream(r, 201); st.KeyAttribute != "" || !strings.Contains(string(r.body), `"key_attribute":""`) {
		t.Fatalf("a keyless stream answered %s", r.body)
	}
	var list streamapi.ListStreamsResponse
	if err := json.Unmarshal(call(t, "GET", base, "").body, &list); err != nil || len(list.Streams) != 2 || list.Streams[0].KeyAttribute != "service.name" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if st := stream(call(t, "PATCH", base+"/logs", `{"key_attribute":"host.name"}`), 200); st.KeyAttribute != "host.name" {
		t.Fatalf("patch answered key_attribute %q", st.KeyAttribute)
	}
	if st := stream(call(t, "PATCH", base+"/logs", `{"retention_ms":60000}`), 200); st.KeyAttribute != "host.name" {
		t.Fatalf("a patch without key_attribute changed it to %q", st.KeyAttribute)
	}
	// JSON decoding turns invalid UTF-8 into U+FFFD, so over HTTP only the length can be wrong.
	long := strings.Repeat("k", 256)
	for _, tc := range []struct{ method, url, body string }{
		{"POST", base, `{"name":"bad","key_attribute":"` + long + `"}`},
		{"PATCH", base + "/logs", `{"key_attribute":"` + long + `"}`},
	} {
		r := call(t, tc.method, tc.url, tc.body)
		if d := r.detail(t); r.status != 400 || d.Code != streamapi.CodeInvalidArgument || !strings.Contains(d.Message, `"key_attribute"`) {
			t.Errorf("%s %.60s: %d %+v, want 400 invalid_argument naming key_attribute", tc.method, tc.body, r.status, d)
		}
	}
	if st := stream(call(t, "GET", base+"/logs", ""), 200); st.KeyAttribute != "host.name" {
		t.Fatalf("a refused patch changed key_attribute to %q", st.KeyAttribute)
	}
	if r := call(t, "GET", base+"/bad", ""); r.status != 404 {
		t.Fatalf("a refused create made the stream: %d", r.status)
	}
	if st := stream(call(t, "PATCH", base+"/logs", `{"key_attribute":""}`), 200); st.KeyAttribute != "" {
		t.Fatalf("clearing answered key_attribute %q", st.KeyAttribute)
	}
}

package grpcapi_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestCreateArrowStreamGRPC: CreateStream makes an arrow stream from the JSON schema or
// from an Arrow IPC schema message; both answer the HTTP API's schema and take records;
// a schema without encoding arrow, both forms at once, neither, a malformed IPC message
// and a refused type are each refused naming what is wrong.
func TestCreateArrowStreamGRPC(t *testing.T) {
	e := start(t, httpapi.Limits{})
	c := ctx(t)
	sch, err := arrowenc.ParseSchema([]byte(flightSchema))
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*loamv1pb.CreateStreamRequest{
		"json": {Namespace: "default", Name: "j", Encoding: "arrow", Schema: flightSchema},
		"ipc":  {Namespace: "default", Name: "i", Encoding: "arrow", ArrowSchema: sch.IPC()},
	} {
		res, err := e.streams.CreateStream(c, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.GetStream().GetEncoding() != "arrow" {
			t.Fatalf("%s: created %v", name, res.GetStream())
		}
		code, body := httpDo(t, "GET", e.http+"/v1/namespaces/default/streams/"+req.Name+"/schema", "")
		if code != 200 || !strings.Contains(body, `"key":"id"`) || !strings.Contains(body, `"timestamp":"ts"`) || !strings.Contains(body, `"name":"price"`) {
			t.Fatalf("%s: schema %d %s", name, code, body)
		}
		recs := []*loamv1pb.Record{{Value: []byte(`{"id":1,"name":"n","ts":1700000000000,"price":"1.50","tags":["x"],"ok":true}`)}}
		if _, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: req.Name, Records: recs}); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		req  *loamv1pb.CreateStreamRequest
		want string
	}{
		"schema without arrow": {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x1", Schema: flightSchema}, `for encoding "arrow"`},
		"both forms":           {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x2", Encoding: "arrow", Schema: flightSchema, ArrowSchema: sch.IPC()}, "not both"},
		"no schema":            {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x3", Encoding: "arrow"}, "needs a schema"},
		"malformed ipc":        {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x4", Encoding: "arrow", ArrowSchema: []byte("not arrow at all")}, "arrow ipc schema message"},
		"bad json":             {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x5", Encoding: "arrow", Schema: `{"fields":[{"name":"a","type":"int128"}]}`}, "int128"},
		"unknown encoding":     {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x6", Encoding: "avro"}, `"avro"`},
		"key attribute":        {&loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x7", Encoding: "arrow", Schema: flightSchema, KeyAttribute: "service.name"}, "key_attribute"},
	} {
		_, err := e.streams.CreateStream(c, tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", name, err, tc.want)
		}
	}
	if code, body := httpDo(t, "GET", e.http+"/v1/namespaces/default/streams", ""); code != 200 || strings.Contains(body, `"x1"`) || strings.Contains(body, `"x4"`) {
		t.Fatalf("a refused create made a stream: %d %s", code, body)
	}
}

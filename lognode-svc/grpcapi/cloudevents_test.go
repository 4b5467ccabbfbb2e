package grpcapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/cloudevents"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestProduceCloudEvents: a protobuf batch with typed extensions over gRPC is appended
// once, a retry answers the original offsets, the record carries loam_ce_types, the
// structured read-back keeps every attribute, and an invalid event is INVALID_ARGUMENT
// naming its index and attribute with nothing written.
func TestProduceCloudEvents(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "hooks", 2)
	c := loamv1pb.NewCloudEventServiceClient(e.conn)
	ev := &cloudevents.Event{Attrs: []cloudevents.Attr{
		{Name: "specversion", Value: "1.0"}, {Name: "id", Value: "g-1"}, {Name: "source", Value: "/grpc"}, {Name: "type", Value: "t"},
		{Name: "time", Value: "2026-11-30T12:00:00.5Z"}, {Name: "datacontenttype", Value: "text/plain"},
		{Name: "n", Value: "42", Type: cloudevents.Integer}, {Name: "ok", Value: "true", Type: cloudevents.Boolean},
		{Name: "home", Value: "https://example.com", Type: cloudevents.URI}, {Name: "when", Value: "2026-01-02T03:04:05Z", Type: cloudevents.Timestamp},
		{Name: "blob", Value: "AAE=", Type: cloudevents.Binary}, {Name: "partitionkey", Value: "k-1"}},
		Data: []byte("hello"), HasData: true}
	ev2 := &cloudevents.Event{Attrs: []cloudevents.Attr{{Name: "specversion", Value: "1.0"}, {Name: "id", Value: "g-2"},
		{Name: "source", Value: "/grpc"}, {Name: "type", Value: "t"}}}
	req := &loamv1pb.ProduceCloudEventsRequest{Namespace: "default", Stream: "hooks", ContentType: cloudevents.MediaBatchProto,
		Body: cloudevents.AppendBatchProto(nil, []*cloudevents.Event{ev, ev2})}
	first, err := c.ProduceCloudEvents(ctx(t), req)
	if err != nil || len(first.GetEvents()) != 2 || first.GetToken() == "" {
		t.Fatalf("produce: %v %v", first, err)
	}
	for _, r := range first.GetEvents() {
		if r.GetStatus() != loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_APPENDED {
			t.Fatalf("first: %v", first)
		}
	}
	again, err := c.ProduceCloudEvents(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again.GetEvents() {
		f := first.GetEvents()[i]
		if r.GetStatus() != loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_DUPLICATE || r.GetPartition() != f.GetPartition() || r.GetOffset() != f.GetOffset() {
			t.Fatalf("retry %d: %v, first %v", i, r, f)
		}
	}
	// The stored record: the Kafka binding's binary layout with loam_ce_types.
	p := first.GetEvents()[0].GetPartition()
	resp, err := http.Get(e.http + "/v1/namespaces/default/streams/hooks/partitions/" + string(rune('0'+p)) + "/records")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`{"key":"loam_ce_types","value":"n=integer,ok=boolean,home=uri,when=timestamp,blob=binary"}`,
		`{"key":"content-type","value":"text/plain"}`, `"key":"k-1"`, `{"key":"ce_time","value":"2026-11-30T12:00:00.5Z"}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("record lacks %s: %s", want, raw)
		}
	}
	resp, err = http.Get(e.http + "/v1/namespaces/default/streams/hooks/partitions/" + string(rune('0'+p)) + "/events")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var back []json.RawMessage
	if err := json.Unmarshal(raw, &back); err != nil || len(back) == 0 {
		t.Fatalf("%s: %v", raw, err)
	}
	if want := string(cloudevents.AppendJSON(nil, ev)); string(back[0]) != want {
		t.Fatalf("read back\n %s\nwant\n %s", back[0], want)
	}
	// An invalid event refuses the whole batch.
	bad := &cloudevents.Event{Attrs: []cloudevents.Attr{{Name: "specversion", Value: "1.0"}, {Name: "id", Value: "g-3"}, {Name: "source", Value: "/grpc"}}}
	_, err = c.ProduceCloudEvents(ctx(t), &loamv1pb.ProduceCloudEventsRequest{Namespace: "default", Stream: "hooks", ContentType: cloudevents.MediaBatchProto,
		Body: cloudevents.AppendBatchProto(nil, []*cloudevents.Event{ev2, bad})})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "event 1") || !strings.Contains(st.Message(), `"type"`) {
		t.Fatalf("invalid batch: %v", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != httpapi.CodeInvalidEvent {
			t.Fatalf("reason %s", info.GetReason())
		}
	}
	_, err = c.ProduceCloudEvents(ctx(t), &loamv1pb.ProduceCloudEventsRequest{Namespace: "default", Stream: "hooks", ContentType: "application/json", Body: []byte(`{}`)})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("not a CloudEvents format: %v", err)
	}
	_, err = c.ProduceCloudEvents(ctx(t), &loamv1pb.ProduceCloudEventsRequest{Namespace: "default", Stream: "nope", ContentType: cloudevents.MediaJSON,
		Body: cloudevents.AppendJSON(nil, ev2)})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("missing stream: %v", err)
	}
}

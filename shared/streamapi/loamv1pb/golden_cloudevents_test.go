package loamv1pb_test

import (
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Golden messages of CloudEventService (testdata/v1, written once with -write-golden,
// never rewritten).
func init() {
	for name, m := range map[string]func() proto.Message{
		"produce_cloud_events_request.bin": func() proto.Message {
			return &loamv1pb.ProduceCloudEventsRequest{Namespace: "default", Stream: "hooks", Partition: proto.Int32(1),
				ContentType: "application/cloudevents+json", Body: []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t"}`)}
		},
		"produce_cloud_events_response.bin": func() proto.Message {
			return &loamv1pb.ProduceCloudEventsResponse{Token: "v1.42", Events: []*loamv1pb.CloudEventResult{
				{Status: loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_APPENDED, Partition: 1, Offset: 7},
				{Status: loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_DUPLICATE, Partition: 0, Offset: 3},
				{Status: loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_IN_FLIGHT, Partition: 2, Offset: -1}}}
		},
	} {
		goldenMessages[name] = m
	}
}

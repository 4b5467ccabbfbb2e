package loamv1pb_test

import (
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Golden messages of QuotaService and of the consistency-token fields of Fetch and
// Subscribe (testdata/v1, written once with -write-golden, never rewritten).
func init() {
	for name, m := range map[string]func() proto.Message{
		"fetch_request_token.bin": func() proto.Message {
			return &loamv1pb.FetchRequest{Namespace: "default", Stream: "orders", Partition: 1, Offset: 1000, MaxBytes: 1 << 20,
				MaxWaitMs: 5000, Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES, Token: "v1.42"}
		},
		"subscribe_request_token.bin": func() proto.Message {
			return &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "orders", Partition: 1, Offset: 5, MaxBytes: 4096,
				Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORDS, Token: "v1.42"}
		},
		"quota.bin":             func() proto.Message { return &loamv1pb.Quota{Namespace: "default", IngestBytesPerSec: 1 << 20} },
		"get_quota_request.bin": func() proto.Message { return &loamv1pb.GetQuotaRequest{Namespace: "default"} },
		"set_quota_request.bin": func() proto.Message {
			return &loamv1pb.SetQuotaRequest{Namespace: "default", IngestBytesPerSec: 1 << 20}
		},
	} {
		goldenMessages[name] = m
	}
}

package loamv1pb_test

import (
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// The golden messages of ConsumerAdminService (TestGolden).
func init() {
	goldenMessages["consumer_delete_request.bin"] = func() proto.Message {
		return &loamv1pb.DeleteConsumerRequest{Namespace: "default", Consumer: "billing", Force: true}
	}
	goldenMessages["consumer_reset_offsets_request.bin"] = func() proto.Message {
		ts := int64(1732869990000)
		return &loamv1pb.ResetOffsetsRequest{Namespace: "default", Consumer: "billing", Stream: "orders", To: "timestamp",
			Partitions: []int32{0, 2}, TimestampMs: &ts, Force: true}
	}
	goldenMessages["consumer_reset_offsets_response.bin"] = func() proto.Message {
		return &loamv1pb.ResetOffsetsResponse{Offsets: []*loamv1pb.PartitionOffset{{Partition: 0, Offset: 120}, {Partition: 2, Offset: 0}}}
	}
}

package loamv1pb_test

import (
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// The golden messages of ConsumerService (TestGolden).
func init() {
	goldenMessages["consumer_heartbeat_request.bin"] = func() proto.Message {
		return &loamv1pb.HeartbeatRequest{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "host-1/4242", SessionMs: 10000, Leave: true}
	}
	goldenMessages["consumer_heartbeat_response.bin"] = func() proto.Message {
		return &loamv1pb.HeartbeatResponse{Partitions: 4, Members: 2, ExpiresMs: 1732870010000, ClockMs: 1732870000000,
			Leases: []*loamv1pb.ConsumerLease{{Partition: 0, Epoch: 3, ExpiresMs: 1732870010000}, {Partition: 2, Epoch: 1, ExpiresMs: 1732870010000}}}
	}
	goldenMessages["consumer_commit_offsets_request.bin"] = func() proto.Message {
		return &loamv1pb.CommitOffsetsRequest{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "host-1/4242",
			Offsets: []*loamv1pb.CommitOffset{{Partition: 0, Offset: 120, Metadata: "batch 7", Epoch: 3}, {Partition: 2, Offset: 0, Epoch: 1}}}
	}
	goldenMessages["consumer_describe_response.bin"] = func() proto.Message {
		return &loamv1pb.DescribeConsumerResponse{ClockMs: 1732870000000,
			Partitions: []*loamv1pb.ConsumerPartition{{Stream: "orders", Partition: 0, Committed: 120, Metadata: "batch 7", CommittedMs: 1732869990000,
				HighWatermark: 150, LogStart: 10, Lag: 30, Holder: "host-1/4242", Epoch: 3, LeaseExpiresMs: 1732870010000},
				{Stream: "orders", Partition: 1, Committed: -1, HighWatermark: 5, Lag: 5}},
			Members: []*loamv1pb.ConsumerMember{{Stream: "orders", Member: "host-1/4242", ExpiresMs: 1732870010000}}}
	}
	goldenMessages["consumer_list_response.bin"] = func() proto.Message {
		return &loamv1pb.ListConsumersResponse{Consumers: []string{"audit", "billing"}}
	}
}

package loamv1pb_test

import (
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Golden messages of the produce of an Arrow IPC stream to an arrow stream (testdata/v1,
// written once with -write-golden, never rewritten).
func init() {
	goldenMessages["produce_request_arrow_ipc.bin"] = func() proto.Message {
		return &loamv1pb.ProduceRequest{Namespace: "default", Stream: "orders", ArrowIpc: []byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0}, ArrowPartition: i32(2)}
	}
}

// Golden messages of the creation of an arrow stream over gRPC, with the schema's JSON form
// and with an Arrow IPC schema message.
func init() {
	goldenMessages["create_stream_arrow_json.bin"] = func() proto.Message {
		return &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "orders", Encoding: "arrow",
			Schema: `{"fields":[{"name":"id","type":"int64","nullable":false}],"key":"id"}`}
	}
	goldenMessages["create_stream_arrow_ipc.bin"] = func() proto.Message {
		return &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "orders", Encoding: "arrow", ArrowSchema: []byte{0xff, 0xff, 0xff, 0xff, 16, 0, 0, 0}}
	}
}

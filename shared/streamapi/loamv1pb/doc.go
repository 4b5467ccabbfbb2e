// Package loamv1pb holds the messages and services of Loam's native gRPC API, protobuf
// package loam.v1 (docs/grpc-api.md): StreamService (stream and namespace admin) and
// RecordService (Produce, Fetch, Subscribe). The log node serves them (lognode-svc/grpcapi);
// Go clients use the generated clients here.
//
// # Basics
//
// The .proto files under loam/v1 are the API's reference: every field carries its
// documentation. gen.sh regenerates the *.pb.go files; they are committed, so building
// needs no protoc, and TestGeneratedCodeIsCurrent fails when they no longer match the
// .proto files.
//
//	conn, err := grpc.NewClient("127.0.0.1:9090", grpc.WithTransportCredentials(insecure.NewCredentials()))
//	rc := loamv1pb.NewRecordServiceClient(conn)
//	res, err := rc.Produce(ctx, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "orders",
//		Records: []*loamv1pb.Record{{Value: []byte(`{"id":1}`)}}})
//
// # Caveats
//
// loam.v1 only grows: fields are added, never renumbered, retyped or removed.
package loamv1pb

//go:generate ./gen.sh

#!/bin/sh
# Regenerates the *.pb.go files of package loamv1pb from loam/v1/*.proto. CI does not run
# protoc: commit the generated files (TestGeneratedCodeIsCurrent fails when they are stale).
# Needs protoc (apt-get install -y protobuf-compiler), protoc-gen-go v1.36.12 and
# protoc-gen-go-grpc v1.6.2 on PATH or in /root/tools:
#   GOBIN=/root/tools go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   GOBIN=/root/tools go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
set -eu
cd "$(dirname "$0")"
mod=github.com/loamhq/loam/shared/streamapi/loamv1pb
PATH="/root/tools:$PATH" protoc -I . --go_out=. --go_opt=module=$mod \
  --go-grpc_out=. --go-grpc_opt=module=$mod \
  loam/v1/types.proto loam/v1/stream_service.proto loam/v1/producer_service.proto loam/v1/record_service.proto loam/v1/auth_service.proto loam/v1/consumer_service.proto loam/v1/consumer_admin_service.proto loam/v1/quota_service.proto loam/v1/cloudevent_service.proto loam/v1/namespace_key_service.proto

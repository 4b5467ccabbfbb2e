#!/bin/sh
# Regenerates the .pb.go and _grpc.pb.go files of meta.proto, clock.proto, auth.proto,
# consumers.proto, consumer_admin.proto, quota.proto, cloudevents.proto, kafkagroups.proto, nskeys.proto, schemas.proto, placement.proto and quorumindex.proto. CI does not run protoc: commit the generated files. Needs protoc,
# protoc-gen-go v1.36.12 and protoc-gen-go-grpc v1.6.2 on PATH or in /root/tools:
#   GOBIN=/root/tools go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   GOBIN=/root/tools go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
set -eu
cd "$(dirname "$0")"
PATH="/root/tools:$PATH" protoc --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative meta.proto clock.proto auth.proto consumers.proto consumer_admin.proto quota.proto cloudevents.proto kafkagroups.proto nskeys.proto schemas.proto placement.proto quorumindex.proto

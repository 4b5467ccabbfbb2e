# Sequencer image: sequencer-svc (the Raft metastore) on distroless (no shell), running as the
# unprivileged "nonroot" user (uid 65532). Build from the repository root:
#
#   docker buildx build --platform linux/arm64 -f infra/sequencer.Dockerfile -t loam-sequencer .
#
# Run one container per voter with its own persistent volume at /data (owned by uid 65532).
# One voter creates the group, naming the others; the others start without --bootstrap:
#
#   sequencer-svc --id seq-1 --data-dir /data --rpc-addr 10.0.1.10:7070 \
#     --raft-addr 10.0.1.10:7071 --bootstrap --peers seq-2=10.0.2.10:7071,seq-3=10.0.3.10:7071
#
# No HEALTHCHECK: the sequencer binds the voter's own address (Raft must advertise it), not
# 127.0.0.1, so a probe inside the container cannot know where to look. Liveness comes from the
# supervisor's restart policy (systemd in the Terraform module) and Raft itself.

# The build stage runs on the builder's own platform and cross-compiles (pure Go, no cgo).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/sequencer-svc ./sequencer-svc && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sequencer-svc /usr/local/bin/
# An empty /data owned by nonroot, so a fresh named volume mounted there is writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
VOLUME ["/data"]
# Sequencer RPC (log nodes, functions, the loam command) and Raft (voters only).
EXPOSE 7070 7071
ENTRYPOINT ["/usr/local/bin/sequencer-svc"]
CMD ["--data-dir", "/data"]

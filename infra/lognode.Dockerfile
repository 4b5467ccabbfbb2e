# Log node image: lognode-svc plus loam-healthcheck on distroless (no shell), running as the
# unprivileged "nonroot" user (uid 65532). Build from the repository root:
#
#   docker buildx build --platform linux/arm64 -f infra/lognode.Dockerfile -t loam-lognode .
#
# Configuration comes from flags or LOAM_* environment variables (LOAM_NODE_ID, LOAM_ZONE,
# LOAM_HTTP_ADDR, LOAM_BUCKET, LOAM_SEQUENCER, LOAM_LOG_LEVEL); see infra/README.md.

# The build stage runs on the builder's own platform and cross-compiles (pure Go, no cgo).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/lognode-svc ./lognode-svc && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/loam-healthcheck ./infra/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lognode-svc /out/loam-healthcheck /usr/local/bin/
# Inside a container the API must listen on every interface, not the 127.0.0.1 default.
ENV LOAM_HTTP_ADDR=0.0.0.0:8080
USER nonroot:nonroot
# Native HTTP API, /healthz and /metrics.
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/loam-healthcheck", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/lognode-svc"]

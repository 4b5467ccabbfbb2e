package lognodecmd

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/otlp"
)

// otlpFlags are the OTLP logs ingest flags of a log node (docs/otlp.md). Each has an
// environment variable that sets its default.
type otlpFlags struct {
	httpAddr, grpcAddr string
	stream             string
	partitions         int
	autoCreate         string
	keyAttributes      string
}

func (f *otlpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.httpAddr, "otlp-http-addr", envDefault("LOAM_OTLP_HTTP_ADDR", "127.0.0.1:4318"), "OTLP/HTTP address (POST /v1/logs); empty: not served")
	fs.StringVar(&f.grpcAddr, "otlp-grpc-addr", envDefault("LOAM_OTLP_GRPC_ADDR", "127.0.0.1:4317"), "OTLP/gRPC address (LogsService); empty: not served")
	fs.StringVar(&f.stream, "otlp-stream", env("LOAM_OTLP_STREAM", otlp.DefaultStream), "stream of OTLP requests that send no loam-stream header; created on first use")
	parts := otlp.DefaultPartitions
	if v := os.Getenv("LOAM_OTLP_PARTITIONS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			parts = n
		}
	}
	fs.IntVar(&f.partitions, "otlp-partitions", parts, "partition count of the streams OTLP ingest creates")
	fs.StringVar(&f.autoCreate, "otlp-auto-create", env("LOAM_OTLP_AUTO_CREATE", ""), "comma-separated further streams OTLP ingest creates on first use: STREAM (any namespace) or NAMESPACE/STREAM")
	fs.StringVar(&f.keyAttributes, "otlp-key-attributes", env("LOAM_OTLP_KEY_ATTRIBUTES", ""), "comma-separated STREAM=ATTRIBUTE or NAMESPACE/STREAM=ATTRIBUTE: default key attribute of that stream's OTLP records (e.g. otel_logs=service.name), used only when the stream's own key_attribute setting is empty; others are keyless")
}

// apply sets the OTLP fields of cfg.
func (f *otlpFlags) apply(cfg *node.Config) error {
	s, err := f.settings()
	if err != nil {
		return err
	}
	cfg.OTLPHTTPAddr, cfg.OTLPGRPCAddr, cfg.OTLP = f.httpAddr, f.grpcAddr, s
	return nil
}

func (f *otlpFlags) settings() (otlp.Settings, error) {
	s, err := otlp.ParseSettings(f.stream, f.partitions, f.autoCreate, f.keyAttributes)
	if err != nil {
		return otlp.Settings{}, fmt.Errorf("--otlp-*: %w", err)
	}
	return s, nil
}

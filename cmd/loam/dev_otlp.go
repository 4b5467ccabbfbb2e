package main

import (
	"flag"
	"fmt"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/lognode-svc/otlp"
)

// devOTLPFlags are loam dev's OTLP logs ingest flags (docs/otlp.md).
type devOTLPFlags struct {
	httpPort, grpcPort int
	set                bool // a port flag was given (a supervised cluster serves OTLP only then)
	stream             string
	partitions         int
	autoCreate         string
	keyAttributes      string
}

func (f *devOTLPFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.httpPort, "otlp-http-port", 4318, "OTLP/HTTP logs port, POST /v1/logs (0: a free port; -1: none); supervised cluster: node j on port+j, only when given")
	fs.IntVar(&f.grpcPort, "otlp-grpc-port", 4317, "OTLP/gRPC logs port, LogsService (0: a free port; -1: none); supervised cluster: node j on port+j, only when given")
	fs.StringVar(&f.stream, "otlp-stream", otlp.DefaultStream, "stream of OTLP requests that send no loam-stream header; created on first use")
	fs.IntVar(&f.partitions, "otlp-partitions", otlp.DefaultPartitions, "partition count of the streams OTLP ingest creates")
	fs.StringVar(&f.autoCreate, "otlp-auto-create", "", "comma-separated further streams OTLP ingest creates on first use: STREAM or NAMESPACE/STREAM")
	fs.StringVar(&f.keyAttributes, "otlp-key-attributes", "", "comma-separated STREAM=ATTRIBUTE or NAMESPACE/STREAM=ATTRIBUTE: default key attribute of that stream's OTLP records (e.g. otel_logs=service.name), used only when the stream's own key_attribute setting is empty")
}

// apply sets cfg's OTLP fields after fs was parsed.
func (f *devOTLPFlags) apply(fs *flag.FlagSet, host string, cfg *devcluster.Config) error {
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "otlp-http-port" || fl.Name == "otlp-grpc-port" {
			f.set = true
		}
	})
	for _, p := range []struct {
		name string
		port int
		addr *string
	}{{"otlp-http-port", f.httpPort, &cfg.OTLPHTTPAddr}, {"otlp-grpc-port", f.grpcPort, &cfg.OTLPGRPCAddr}} {
		if p.port < -1 || p.port > 65535 {
			return usageError{fmt.Errorf("dev: --%s %d: want a port, 0 (a free port) or -1 (none)", p.name, p.port)}
		}
		if p.port >= 0 {
			*p.addr = fmt.Sprintf("%s:%d", host, p.port)
		}
	}
	s, err := otlp.ParseSettings(f.stream, f.partitions, f.autoCreate, f.keyAttributes)
	if err != nil {
		return usageError{fmt.Errorf("dev: --otlp-*: %w", err)}
	}
	cfg.OTLP = s
	return nil
}

// supervisedPorts are the OTLP ports of a supervised cluster's node 0 (0: not served).
func (f *devOTLPFlags) supervisedPorts() (httpPort, grpcPort int) {
	if !f.set {
		return 0, 0
	}
	return max(f.httpPort, 0), max(f.grpcPort, 0)
}

package lognodecmd

import (
	"flag"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/node"
)

func parseOTLPFlags(t *testing.T, args ...string) (*node.Config, error) {
	t.Helper()
	var f otlpFlags
	fs := flag.NewFlagSet("lognode-svc", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var cfg node.Config
	return &cfg, f.apply(&cfg)
}

func TestOTLPFlags(t *testing.T) {
	t.Setenv("LOAM_OTLP_GRPC_ADDR", "") // set but empty: no OTLP/gRPC
	cfg, err := parseOTLPFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OTLPHTTPAddr != "127.0.0.1:4318" || cfg.OTLPGRPCAddr != "" || cfg.OTLP.DefaultStream != "otel_logs" || cfg.OTLP.Partitions != 4 {
		t.Errorf("defaults: %q %q %+v", cfg.OTLPHTTPAddr, cfg.OTLPGRPCAddr, cfg.OTLP)
	}
	t.Setenv("LOAM_OTLP_PARTITIONS", "6")
	cfg, err = parseOTLPFlags(t, "--otlp-grpc-addr", "127.0.0.1:14317", "--otlp-auto-create", "audit, team/app",
		"--otlp-key-attributes", "otel_logs=service.name,team/app=k8s.pod.name")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OTLPGRPCAddr != "127.0.0.1:14317" || cfg.OTLP.Partitions != 6 || len(cfg.OTLP.AutoCreate) != 2 || cfg.OTLP.AutoCreate[1] != "team/app" ||
		cfg.OTLP.KeyAttributes["otel_logs"] != "service.name" || cfg.OTLP.KeyAttributes["team/app"] != "k8s.pod.name" {
		t.Errorf("set: %q %+v", cfg.OTLPGRPCAddr, cfg.OTLP)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--otlp-partitions", "0"}, "partitions 0"},
		{[]string{"--otlp-key-attributes", "otel_logs"}, `"otel_logs" is not STREAM=ATTRIBUTE`},
		{[]string{"--otlp-auto-create", "a/b/c"}, `"a/b/c" is neither`},
	} {
		if _, err := parseOTLPFlags(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

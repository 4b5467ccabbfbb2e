package lognodecmd

import (
	"flag"
	"net"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/node"
)

func TestKafkaFlags(t *testing.T) {
	parse := func(args ...string) (node.Config, error) {
		var f kafkaFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			return node.Config{}, err
		}
		var cfg node.Config
		err := f.apply(&cfg)
		return cfg, err
	}
	cfg, err := parse("--kafka-addr", "127.0.0.1:9092", "--kafka-advertised-listener", "lb.example:9092", "--kafka-no-sasl")
	if err != nil || cfg.KafkaAddr != "127.0.0.1:9092" || cfg.KafkaAdvertisedListener != "lb.example:9092" || !cfg.KafkaNoAuth || cfg.KafkaAdvertise != "" {
		t.Fatalf("%+v %v", cfg, err)
	}
	if _, err := parse("--kafka-advertise", "nohost"); err == nil || !strings.Contains(err.Error(), "--kafka-advertise") {
		t.Fatalf("a bad --kafka-advertise: %v", err)
	}
	if _, err := parse("--kafka-max-frame-bytes", "0"); err == nil {
		t.Fatal("--kafka-max-frame-bytes 0 accepted")
	}
	cfg, err = parse("--kafka-addr", "0.0.0.0:9092")
	if err != nil {
		t.Fatal(err)
	}
	if ip := hostIP(); ip != "" && cfg.KafkaAdvertise != net.JoinHostPort(ip, "9092") {
		t.Fatalf("wildcard listener advertised as %q, want this host's %s:9092", cfg.KafkaAdvertise, ip)
	}
}

package lognodecmd

import (
	"flag"
	"fmt"
	"net"

	"github.com/loamhq/loam/lognode-svc/kafka"
	"github.com/loamhq/loam/lognode-svc/node"
)

// kafkaFlags are the Kafka gateway's flags: its listener, the address it is advertised
// at, a load balancer to name as the only broker, and whether it checks API keys over
// SASL/PLAIN or SCRAM (it does whenever the node checks keys, unless --kafka-no-sasl).
type kafkaFlags struct {
	addr, advertise, lb string
	noSASL              bool
	maxFrame            int
}

func (f *kafkaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "kafka-addr", env("LOAM_KAFKA_ADDR", ""), "Kafka protocol listener address, e.g. 0.0.0.0:9092 (host:0 picks a free port; empty: no Kafka listener)")
	fs.StringVar(&f.advertise, "kafka-advertise", env("LOAM_KAFKA_ADVERTISE", ""), "host:port Kafka clients reach this node at: the node registry records it and Metadata names it (default: the listen address; for a wildcard one, this host's first non-loopback IPv4 address)")
	fs.StringVar(&f.lb, "kafka-advertised-listener", env("LOAM_KAFKA_ADVERTISED_LISTENER", ""), "host:port of a load balancer in front of every node: Metadata names it as the only broker and group requests are forwarded to their coordinator")
	fs.BoolVar(&f.noSASL, "kafka-no-sasl", false, "serve the Kafka listener without SASL even when the node checks API keys (anyone reaching it may read and write namespace default)")
	fs.IntVar(&f.maxFrame, "kafka-max-frame-bytes", kafka.DefaultMaxFrameBytes, "largest Kafka request frame; a longer length prefix closes the connection before the frame is read")
}

// apply sets the node configuration's Kafka block.
func (f *kafkaFlags) apply(cfg *node.Config) error {
	for name, v := range map[string]string{"--kafka-advertise": f.advertise, "--kafka-advertised-listener": f.lb} {
		if v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("%s %q: want host:port: %w", name, v, err)
		}
	}
	if f.maxFrame <= 0 {
		return fmt.Errorf("--kafka-max-frame-bytes %d: want a positive size", f.maxFrame)
	}
	if f.advertise == "" && f.addr != "" {
		// A wildcard listen address is no address to give clients or other nodes: advertise
		// this host's first non-loopback address instead (a Fargate task's own).
		if host, port, err := net.SplitHostPort(f.addr); err == nil && port != "0" && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) {
			if ip := hostIP(); ip != "" {
				f.advertise = net.JoinHostPort(ip, port)
			}
		}
	}
	cfg.KafkaAddr, cfg.KafkaAdvertise, cfg.KafkaAdvertisedListener = f.addr, f.advertise, f.lb
	cfg.KafkaNoAuth, cfg.KafkaMaxFrameBytes = f.noSASL, f.maxFrame
	return nil
}

// hostIP is the first non-loopback unicast IPv4 address of this host, or "".
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String()
		}
	}
	return ""
}

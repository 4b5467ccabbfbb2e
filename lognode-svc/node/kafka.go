package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/kafka"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/coord"
)

// startKafka builds the Kafka gateway and its listener when the configuration names one
// (nil, nil otherwise).
func startKafka(cfg Config, log *slog.Logger, reg prometheus.Registerer, writers map[string]writer.Writer, rd *reader.Reader, api *httpapi.Server) (net.Listener, *kafka.Server, error) {
	kln := cfg.KafkaListener
	if kln == nil && cfg.KafkaAddr == "" {
		return nil, nil, nil
	}
	kcfg := kafka.Config{NodeID: cfg.NodeID, Zone: cfg.Zone, Meta: cfg.Meta, Writers: writers, Reader: rd, Streams: api,
		Limits: cfg.Limits, MaxFrameBytes: cfg.KafkaMaxFrameBytes, Self: cfg.KafkaAdvertise, Advertised: cfg.KafkaAdvertisedListener,
		Groups: cfg.KafkaGroups, Logger: log, Registry: reg, Now: cfg.Now}
	if !cfg.KafkaNoAuth {
		kcfg.Auth = cfg.Auth
	}
	if cfg.TLS != nil {
		kcfg.TLS = cfg.TLS.ServerConfig()
		kcfg.ForwardTLS = cfg.TLS.ClientConfig()
	}
	if cfg.Registry != nil {
		kcfg.Nodes = func(ctx context.Context, zone string) ([]coord.Node, error) { return cfg.Registry.Live(ctx, zone) }
	}
	kapi, err := kafka.New(kcfg)
	if err != nil {
		return nil, nil, err
	}
	if kln == nil {
		if kln, err = net.Listen("tcp", cfg.KafkaAddr); err != nil {
			return nil, nil, fmt.Errorf("node: listen %s (kafka): %w", cfg.KafkaAddr, err)
		}
	}
	return kln, kapi, nil
}

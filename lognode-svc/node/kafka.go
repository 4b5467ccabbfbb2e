package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/kafka"
	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
)

// startKafka builds the Kafka gateway and its listener when the configuration names one
// (nil, nil otherwise), and the group coordinator it made (nil when Config brought one).
func startKafka(cfg Config, log *slog.Logger, reg prometheus.Registerer, writers map[string]writer.Writer, rd *reader.Reader, api *httpapi.Server) (net.Listener, *kafka.Server, *group.Coordinator, error) {
	kln := cfg.KafkaListener
	if kln == nil && cfg.KafkaAddr == "" {
		return nil, nil, nil, nil
	}
	// The consumer-group coordinator (package kafka/group) unless the configuration brings
	// its own: it coordinates the groups this node owns (FindCoordinator's rendezvous owner)
	// and names topics by the ids Metadata answers.
	var kapi *kafka.Server
	var made *group.Coordinator
	groups := cfg.KafkaGroups
	if groups == nil {
		gcfg := group.DefaultConfig()
		gcfg.Meta, gcfg.Registry, gcfg.Logger = cfg.Meta, reg, log.With("svc", "kafka-groups")
		if cfg.Now != nil {
			gcfg.Now = cfg.Now
		}
		gcfg.Owns = func(ns, g string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return kapi != nil && kapi.OwnsGroup(ctx, ns, g)
		}
		gcfg.TopicID = func(ns string, s meta.Stream) [16]byte { return kafka.TopicID(ns, s.ID) }
		gc, err := group.New(gcfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("node: kafka groups: %w", err)
		}
		groups, made = gc, gc
	}
	kcfg := kafka.Config{NodeID: cfg.NodeID, Zone: cfg.Zone, Meta: cfg.Meta, Writers: writers, Reader: rd, Streams: api,
		Limits: cfg.Limits, MaxFrameBytes: cfg.KafkaMaxFrameBytes, Self: cfg.KafkaAdvertise, Advertised: cfg.KafkaAdvertisedListener,
		Groups: groups, Logger: log, Registry: reg, Now: cfg.Now}
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
	var err error
	kapi, err = kafka.New(kcfg)
	if err != nil {
		if made != nil {
			made.Close()
		}
		return nil, nil, nil, err
	}
	if kln == nil {
		if kln, err = net.Listen("tcp", cfg.KafkaAddr); err != nil {
			if made != nil {
				made.Close()
			}
			return nil, nil, nil, fmt.Errorf("node: listen %s (kafka): %w", cfg.KafkaAddr, err)
		}
	}
	return kln, kapi, made, nil
}

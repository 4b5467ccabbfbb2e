package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/coord"
)

// Brokers: which log nodes Metadata, DescribeCluster and FindCoordinator name.
//
// Every live log node with a Kafka listener is a broker, its id a hash of its node id
// (stable across restarts of the same node id). A client's zone is "loam_az=<zone>"
// inside its client id (WarpStream's ws_az convention): Metadata then names only the live
// nodes of that zone (every live node when the zone has none). With Config.Advertised
// set, the advertised listener (a load balancer) is the only broker, id 0.

// broker is one broker as the protocol names it.
type broker struct {
	id   int32
	node string // log node id ("" for the advertised listener)
	host string
	port int32
	rack *string
}

// zoneOf reads "loam_az=<zone>" out of a client id ("" when absent). The zone ends at
// a comma, semicolon, space or the end of the id.
func zoneOf(clientID string) string {
	const tag = "loam_az="
	i := strings.Index(clientID, tag)
	if i < 0 {
		return ""
	}
	z := clientID[i+len(tag):]
	if j := strings.IndexAny(z, ",; "); j >= 0 {
		z = z[:j]
	}
	return z
}

// brokerID maps a node id to a broker id: 31 bits of its FNV-1a hash, never 0 (the
// advertised listener's) nor negative.
func brokerID(node string) int32 {
	h := fnv.New32a()
	h.Write([]byte(node))
	id := int32(h.Sum32() & 0x7fffffff)
	if id == 0 {
		id = 1
	}
	return id
}

func splitHostPort(addr string) (string, int32, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return host, int32(p), true
}

// brokers lists the brokers a client of zone is told of, in a stable order, never empty.
func (s *Server) brokers(ctx context.Context, zone string) []broker {
	if s.cfg.Advertised != "" {
		host, port, _ := splitHostPort(s.cfg.Advertised)
		return []broker{{id: 0, host: host, port: port}}
	}
	var out []broker
	for _, n := range s.liveNodes(ctx, zone) {
		host, port, ok := splitHostPort(n.KafkaAddr)
		if !ok {
			continue
		}
		b := broker{id: brokerID(n.ID), node: n.ID, host: host, port: port}
		if n.Zone != "" {
			z := n.Zone
			b.rack = &z
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		out = []broker{s.selfBroker()}
	}
	return out
}

func (s *Server) selfBroker() broker {
	host, port, _ := splitHostPort(s.selfAddr())
	b := broker{id: brokerID(s.cfg.NodeID), node: s.cfg.NodeID, host: host, port: port}
	if s.cfg.Zone != "" {
		z := s.cfg.Zone
		b.rack = &z
	}
	return b
}

func (s *Server) selfAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Self
}

// liveNodes answers Config.Nodes(zone), reusing an answer for DefaultNodesTTL. A failed
// lookup answers the last known list (or this node alone).
func (s *Server) liveNodes(ctx context.Context, zone string) []coord.Node {
	if s.cfg.Nodes == nil {
		return []coord.Node{{ID: s.cfg.NodeID, Zone: s.cfg.Zone, KafkaAddr: s.selfAddr()}}
	}
	now := time.Now()
	s.nodesMu.Lock()
	if s.nodesZone == nil || now.Sub(s.nodesAt) > DefaultNodesTTL {
		s.nodesZone, s.nodesAt = map[string][]coord.Node{}, now
	}
	if ns, ok := s.nodesZone[zone]; ok {
		s.nodesMu.Unlock()
		return ns
	}
	s.nodesMu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ns, err := s.cfg.Nodes(lctx, zone)
	if err != nil || len(ns) == 0 {
		if err != nil {
			s.cfg.Logger.Warn("kafka: live nodes lookup failed: answering this node", "err", err)
		}
		ns = []coord.Node{{ID: s.cfg.NodeID, Zone: s.cfg.Zone, KafkaAddr: s.selfAddr()}}
	}
	s.nodesMu.Lock()
	if len(s.nodesZone) < 1024 { // bounded: zones are few
		s.nodesZone[zone] = ns
	}
	s.nodesMu.Unlock()
	return ns
}

// leaderOf picks the broker leading partition p of topic: partitions spread over the
// brokers, starting at a hash of the topic.
func leaderOf(bs []broker, topic string, p int32) broker {
	h := fnv.New32a()
	h.Write([]byte(topic))
	return bs[(uint64(h.Sum32())+uint64(p))%uint64(len(bs))]
}

// topicID derives a stream's Kafka topic id: 16 bytes of SHA-256 over its namespace and
// its never-reused stream id, so a topic deleted and created again gets a new id.
func topicID(ns string, streamID uint64) [16]byte {
	h := sha256.New()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint64(nil, streamID))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}

// owner is the rendezvous owner of key among the live nodes: the node with the highest
// hash of (key, node id). Every node computes the same owner from the same live list.
func (s *Server) owner(ctx context.Context, key string) coord.Node {
	var best coord.Node
	var bestH uint64
	for _, n := range s.liveNodes(ctx, "") {
		if n.KafkaAddr == "" {
			continue
		}
		h := sha256.New()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(n.ID))
		v := binary.BigEndian.Uint64(h.Sum(nil))
		if best.ID == "" || v > bestH {
			best, bestH = n, v
		}
	}
	if best.ID == "" {
		return coord.Node{ID: s.cfg.NodeID, Zone: s.cfg.Zone, KafkaAddr: s.selfAddr()}
	}
	return best
}

// TopicID is the Kafka topic id Metadata answers for stream streamID of namespace ns (the
// group coordinator's KIP-848 assignments name topics by it).
func TopicID(ns string, streamID uint64) [16]byte { return topicID(ns, streamID) }

// OwnsGroup reports whether this node is the coordinator of group of ns now: the rendezvous
// owner of (ns, group) among the live nodes, as FindCoordinator answers it.
func (s *Server) OwnsGroup(ctx context.Context, ns, group string) bool {
	return s.owner(ctx, groupKey(ns, group)).ID == s.cfg.NodeID
}

package coord

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Node is a log node as the registry knows it.
type Node struct {
	ID        string // unique per running node
	Zone      string // availability zone (us-east-1a); "" when unknown
	HTTPAddr  string // native HTTP API, host:port
	GRPCAddr  string // native gRPC API
	KafkaAddr string // Kafka protocol
	PeerAddr  string // peer listener: zone peers send it the chunks they commit (tail-cache fills)
	// JournalAddr is the node's journal Raft listener (the quorum class), host:port; ""
	// when it serves no journal. The sequencer's placement controller picks journal
	// members among the live nodes that have one.
	JournalAddr string
	// Seen is when the node last sent a heartbeat and ExpiresAt when it stops counting as
	// live (rounded up to a whole second). Heartbeat sets both; Live fills them in.
	Seen      time.Time
	ExpiresAt time.Time
}

// Registry is the node registry: log nodes announce themselves with Heartbeat every so
// often, and a node that stops (crash, scale-in) drops out of Live after its TTL. All
// nodes are items of one partition key, so Live is a single query.
//
// Layout: pk "nodes", sk the node ID; attributes zone, http, grpc, kafka, peer, journal,
// seen (Unix milliseconds); ExpiresAt = heartbeat time + TTL.
type Registry struct {
	Store Store
}

const registryPK = "nodes"

// Heartbeat records n as live for ttl from the store's clock, replacing its last heartbeat.
// Nodes call it at a fraction of ttl (a third, say), so one lost heartbeat does not drop
// them.
func (r Registry) Heartbeat(ctx context.Context, n Node, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("coord: heartbeat %s: ttl %v: %w", n.ID, ttl, ErrInvalid)
	}
	now := r.Store.Now()
	_, err := r.Store.Put(ctx, Item{
		PK: registryPK, SK: n.ID,
		ExpiresAt: now.Add(ttl),
		Attrs: map[string]string{
			"zone":    n.Zone,
			"http":    n.HTTPAddr,
			"grpc":    n.GRPCAddr,
			"kafka":   n.KafkaAddr,
			"peer":    n.PeerAddr,
			"journal": n.JournalAddr,
			"seen":    strconv.FormatInt(now.UnixMilli(), 10),
		},
	}, Condition{})
	if err != nil {
		return fmt.Errorf("coord: heartbeat: %w", err)
	}
	return nil
}

// Leave removes node id from the registry at once (graceful shutdown).
func (r Registry) Leave(ctx context.Context, id string) error {
	if err := r.Store.Delete(ctx, registryPK, id, Condition{}); err != nil {
		return fmt.Errorf("coord: leave: %w", err)
	}
	return nil
}

// Live returns the live nodes of zone in ID order. When zone has none, or zone is "", it
// returns every live node: a client in a zone without log nodes still finds one.
func (r Registry) Live(ctx context.Context, zone string) ([]Node, error) {
	var all, inZone []Node
	err := r.Store.Query(ctx, registryPK, "", func(it Item) error {
		n := Node{
			ID:          it.SK,
			Zone:        it.Attrs["zone"],
			HTTPAddr:    it.Attrs["http"],
			GRPCAddr:    it.Attrs["grpc"],
			KafkaAddr:   it.Attrs["kafka"],
			PeerAddr:    it.Attrs["peer"],
			JournalAddr: it.Attrs["journal"],
			ExpiresAt:   it.ExpiresAt,
		}
		if ms, err := strconv.ParseInt(it.Attrs["seen"], 10, 64); err == nil {
			n.Seen = time.UnixMilli(ms)
		}
		all = append(all, n)
		if zone != "" && n.Zone == zone {
			inZone = append(inZone, n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coord: live nodes: %w", err)
	}
	if len(inZone) > 0 {
		return inZone, nil
	}
	return all, nil
}

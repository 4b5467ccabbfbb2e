package group

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// Handler serves the group coordinator's API keys for the Kafka gateway. ns is the
// namespace of the connection (its API key's, or the default). Handle answers every
// request it accepts with a response of the request's version, failures as Kafka error
// codes in it; an error means the request was not for this handler (an API key or version
// outside Versions) and the gateway closes the connection.
type Handler interface {
	Handle(ctx context.Context, ns string, req kmsg.Request) (kmsg.Response, error)
}

// ErrUnsupported: a request of an API key or version Versions does not list.
var ErrUnsupported = errors.New("group: unsupported request")

// Config configures a Coordinator. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Meta reaches the sequencer (generations, committed offsets, topics).
	Meta meta.Client
	// Owns reports whether this node coordinates group of ns now (the rendezvous owner of
	// (ns, group) among the live log nodes); nil: every group. A group this node does not
	// own is answered NOT_COORDINATOR and dropped from memory.
	Owns func(ns, group string) bool
	// TopicID is the Kafka topic id of a stream, as the gateway's Metadata answers it
	// (KIP-848 assignments name topics by id). Default: TopicID.
	TopicID func(ns string, s meta.Stream) [16]byte

	MaxGroups      int // groups in memory (default 10000)
	MaxMembers     int // members of one group, pending joins included (default 1000)
	MaxMemberBytes int // protocol metadata + assignment of one member (default 64 KiB)

	// Classic session timeouts accepted (Kafka's group.min/max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay delays the first rebalance of an empty group, so members
	// starting together join one generation (group.initial.rebalance.delay.ms).
	InitialRebalanceDelay time.Duration
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are KIP-848's
	// group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms.
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// TopicRefresh is how often a KIP-848 group looks its subscribed topics up again
	// (new partitions, regex matches).
	TopicRefresh time.Duration
	// MetaTimeout bounds the sequencer calls made from timers (rebalance completion,
	// session expiry).
	MetaTimeout time.Duration

	// Registry, when set, gets the coordinator's metrics and the lag collector.
	Registry prometheus.Registerer
	Logger   *slog.Logger
	// Now is the clock of sessions and rebalances (default time.Now).
	Now func() time.Time
}

// DefaultConfig has Kafka's defaults, but no initial rebalance delay.
func DefaultConfig() Config {
	return Config{MaxGroups: 10000, MaxMembers: 1000, MaxMemberBytes: 64 << 10,
		MinSessionTimeout: 6 * time.Second, MaxSessionTimeout: 30 * time.Minute,
		ConsumerSessionTimeout: 45 * time.Second, ConsumerHeartbeatInterval: 5 * time.Second,
		TopicRefresh: 5 * time.Second, MetaTimeout: 10 * time.Second}
}

// Validate fills defaults and checks the configuration.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if c.Meta == nil {
		return errors.New("group: config: no meta client")
	}
	fill := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	fillD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&c.MaxGroups, d.MaxGroups)
	fill(&c.MaxMembers, d.MaxMembers)
	fill(&c.MaxMemberBytes, d.MaxMemberBytes)
	fillD(&c.MinSessionTimeout, d.MinSessionTimeout)
	fillD(&c.MaxSessionTimeout, d.MaxSessionTimeout)
	fillD(&c.ConsumerSessionTimeout, d.ConsumerSessionTimeout)
	fillD(&c.ConsumerHeartbeatInterval, d.ConsumerHeartbeatInterval)
	fillD(&c.TopicRefresh, d.TopicRefresh)
	fillD(&c.MetaTimeout, d.MetaTimeout)
	switch {
	case c.MaxGroups < 0 || c.MaxMembers < 0 || c.MaxMemberBytes < 0:
		return fmt.Errorf("group: config: negative bound (groups %d, members %d, member bytes %d)", c.MaxGroups, c.MaxMembers, c.MaxMemberBytes)
	case c.MinSessionTimeout > c.MaxSessionTimeout:
		return fmt.Errorf("group: config: min session timeout %s above the max %s", c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout:
		return fmt.Errorf("group: config: consumer heartbeat interval %s not below the session timeout %s", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	case c.InitialRebalanceDelay < 0:
		return fmt.Errorf("group: config: negative initial rebalance delay %s", c.InitialRebalanceDelay)
	}
	if c.TopicID == nil {
		c.TopicID = TopicID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// TopicID is the default Kafka topic id of stream s of namespace ns: 16 bytes of
// SHA-256(ns 0x00 name 0x00 stream id), never all zero. A stream deleted and created again
// gets a new id, as a Kafka topic does.
func TopicID(ns string, s meta.Stream) [16]byte {
	h := sha256.New()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write([]byte(s.Name))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint64(nil, s.ID))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	if id == ([16]byte{}) {
		id[15] = 1
	}
	return id
}

// Coordinator is the group coordinator of one log node. It implements Handler.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	groups map[gkey]*group

	rebalances prometheus.Counter
	fenced     prometheus.Counter
}

var _ Handler = (*Coordinator)(nil)

type gkey struct{ ns, id string }

// New returns a coordinator; cfg is validated (defaults filled).
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, groups: map[gkey]*group{},
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_group_rebalances_total",
			Help: "Generations completed by the Kafka groups this node coordinates (classic rebalances and KIP-848 group epochs)."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_group_fenced_total",
			Help: "Kafka groups this node dropped because the sequencer refused its generation (another node claimed them)."}),
	}
	if cfg.Registry != nil {
		for _, m := range []prometheus.Collector{c.rebalances, c.fenced, &groupsCollector{c: c},
			&lagCollector{meta: cfg.Meta, max: maxLagSeries, timeout: 2 * time.Second}} {
			if err := cfg.Registry.Register(m); err != nil {
				return nil, fmt.Errorf("group: register metrics: %w", err)
			}
		}
	}
	return c, nil
}

// versions are the (min, max) versions served per API key.
var versions = map[int16][2]int16{
	8: {0, 9}, 9: {0, 9}, 11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5},
	15: {0, 6}, 16: {0, 5}, 42: {0, 2}, 47: {0, 0}, 68: {1, 1}, 69: {0, 1},
}

// Versions answers the versions served per API key: exactly what Handle accepts. The map
// is the caller's.
func (c *Coordinator) Versions() map[int16][2]int16 {
	out := make(map[int16][2]int16, len(versions))
	for k, v := range versions {
		out[k] = v
	}
	return out
}

// Handle serves one request (Handler).
func (c *Coordinator) Handle(ctx context.Context, ns string, req kmsg.Request) (kmsg.Response, error) {
	v, ok := versions[req.Key()]
	if !ok || req.GetVersion() < v[0] || req.GetVersion() > v[1] {
		return nil, fmt.Errorf("%w: api key %d version %d", ErrUnsupported, req.Key(), req.GetVersion())
	}
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return c.offsetCommit(ctx, ns, r), nil
	case *kmsg.OffsetFetchRequest:
		return c.offsetFetch(ctx, ns, r), nil
	case *kmsg.JoinGroupRequest:
		return c.joinGroup(ctx, ns, r), nil
	case *kmsg.HeartbeatRequest:
		return c.heartbeat(ns, r), nil
	case *kmsg.LeaveGroupRequest:
		return c.leaveGroup(ns, r), nil
	case *kmsg.SyncGroupRequest:
		return c.syncGroup(ctx, ns, r), nil
	case *kmsg.DescribeGroupsRequest:
		return c.describeGroups(ctx, ns, r), nil
	case *kmsg.ListGroupsRequest:
		return c.listGroups(ctx, ns, r), nil
	case *kmsg.DeleteGroupsRequest:
		return c.deleteGroups(ctx, ns, r), nil
	case *kmsg.OffsetDeleteRequest:
		return c.offsetDelete(ctx, ns, r), nil
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return c.consumerGroupHeartbeat(ctx, ns, r), nil
	case *kmsg.ConsumerGroupDescribeRequest:
		return c.consumerGroupDescribe(ctx, ns, r), nil
	}
	return nil, fmt.Errorf("%w: api key %d", ErrUnsupported, req.Key())
}

func (c *Coordinator) owns(ns, id string) bool {
	return c.cfg.Owns == nil || c.cfg.Owns(ns, id)
}

// acquire answers the group (ns, id) locked, creating it (not yet claimed) when create.
// nil and NONE: absent and !create; nil and an error code: not owned (the group, if held,
// is dropped: NOT_COORDINATOR) or no room (COORDINATOR_NOT_AVAILABLE).
func (c *Coordinator) acquire(ns, id string, create bool) (*group, int16) {
	k := gkey{ns, id}
	if !c.owns(ns, id) {
		c.mu.Lock()
		g := c.groups[k]
		delete(c.groups, k)
		c.mu.Unlock()
		if g != nil {
			g.mu.Lock()
			g.drop(kerr.NotCoordinator.Code)
			g.mu.Unlock()
		}
		return nil, kerr.NotCoordinator.Code
	}
	for {
		c.mu.Lock()
		g := c.groups[k]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return nil, 0
			}
			if len(c.groups) >= c.cfg.MaxGroups && !c.evictLocked() {
				c.mu.Unlock()
				c.log.Warn("kafka groups: at the cap of groups in memory", "max", c.cfg.MaxGroups, "ns", ns, "group", id)
				return nil, kerr.CoordinatorNotAvailable.Code
			}
			g = newGroup(c, ns, id)
			c.groups[k] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if !g.dead {
			return g, 0
		}
		g.mu.Unlock()
		// Dropped since: take it out here rather than wait for its forget.
		c.forget(g)
	}
}

// evictLocked drops one group without members or waiters (its state is all in the
// sequencer); false when every group has members.
func (c *Coordinator) evictLocked() bool {
	for k, g := range c.groups {
		if !g.mu.TryLock() {
			continue
		}
		if g.idle() {
			g.drop(kerr.NotCoordinator.Code)
			g.mu.Unlock()
			delete(c.groups, k)
			return true
		}
		g.mu.Unlock()
	}
	return false
}

// forget removes g from the map if it is still the group held under its key.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.groups[gkey{g.ns, g.id}] == g {
		delete(c.groups, gkey{g.ns, g.id})
	}
	c.mu.Unlock()
}

// Groups answers the number of groups in memory.
func (c *Coordinator) Groups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.groups)
}

// Close drops every group, answering waiting joins and syncs NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	gs := c.groups
	c.groups = map[gkey]*group{}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.drop(kerr.NotCoordinator.Code)
		g.mu.Unlock()
	}
}

// metaCode maps a sequencer error of a group write to a Kafka error code, and reports
// whether the group was lost (another coordinator holds it).
func metaCode(err error) (code int16, lost bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, meta.ErrStaleGroupGeneration):
		return kerr.NotCoordinator.Code, true
	case errors.Is(err, meta.ErrStreamNotFound), errors.Is(err, meta.ErrPartitionNotFound):
		return kerr.UnknownTopicOrPartition.Code, false
	case errors.Is(err, meta.ErrNamespaceNotFound):
		return kerr.GroupAuthorizationFailed.Code, false
	case errors.Is(err, meta.ErrInvalidArgument):
		return kerr.InvalidRequest.Code, false
	case errors.Is(err, meta.ErrUnavailable), errors.Is(err, meta.ErrNotLeader),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, false
	}
	return kerr.UnknownServerError.Code, false
}

func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if len(prefix) > 64 {
		prefix = prefix[:64]
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

func strp(s string) *string { return &s }

package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/tlsconf"
)

// ErrConfig: an invalid Config.
var ErrConfig = errors.New("server: invalid config")

// Peer is another voter of the Raft group.
type Peer struct {
	ID       string
	RaftAddr string
}

// ParsePeers parses "id=raftaddr,id=raftaddr".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		id, addr, ok := strings.Cut(p, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%w: peer %q: want id=host:port", ErrConfig, p)
		}
		out = append(out, Peer{ID: id, RaftAddr: addr})
	}
	return out, nil
}

// Config configures a sequencer node. Start with DefaultConfig and set DataDir.
type Config struct {
	ID       string // Raft server id, unique in the group
	DataDir  string // state.db (FSM), raft.db (log + stable store), snapshots/
	RPCAddr  string // gRPC listen address (also what followers name as leader hint)
	RaftAddr string // Raft TCP transport address
	// RaftAdvertise is the Raft address other voters dial, when RaftAddr is a wildcard.
	RaftAdvertise string
	// DisableRPC starts no gRPC server (an embedding process uses NewLocalClient).
	DisableRPC bool
	// Bootstrap makes a new group of this node and Peers when the data dir holds no Raft
	// state; it is ignored otherwise.
	Bootstrap bool
	Peers     []Peer
	// Join, on a node that is not yet a voter (an empty data dir), names RPC addresses of
	// voters of a running group: Start adds this node as a non-voter, waits until it has
	// caught up, then promotes it to voter. Exclusive with Bootstrap.
	Join []string

	SnapshotThreshold uint64        // entries since the last snapshot that trigger one
	SnapshotInterval  time.Duration // how often the threshold is checked
	TrailingLogs      uint64        // entries kept after a snapshot
	SnapshotRetain    int           // snapshots kept on disk

	// ApplyTimeout bounds one proposal (enqueue and commit) when ctx has no earlier deadline.
	ApplyTimeout time.Duration
	// LeaderWait bounds how long a follower waits to know a reachable leader (during an
	// election) before it answers NotLeader instead of forwarding.
	LeaderWait time.Duration
	// ReadWait bounds how long a follower waits for its state to reach the leader's read
	// index before it forwards a read to the leader instead.
	ReadWait time.Duration

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	WatchRing int // recent events kept for Watch replay
	// WatchRingEntries bounds the index entries the ring's events add up to (an event
	// holds at least the newest one whatever its size).
	WatchRingEntries int
	WatchBuffer      int // events queued per watcher before it is dropped with a Reset

	// MaxProducers caps the idempotent producers of each namespace (0:
	// meta.DefaultMaxProducers); a new one beyond it evicts the least recently used. The
	// leader carries the value in each InitProducer command, so replicas agree.
	MaxProducers int

	Logger        *slog.Logger     // service logs (default: JSON to stderr)
	RaftLogOutput io.Writer        // hashicorp/raft's own JSON logs (default stderr)
	Now           func() time.Time // this voter's clock for command stamps and clock reports (default time.Now)

	// MaxClockSkew is how far the leader's clock may run ahead of a majority of voters'
	// clocks: a leader further ahead stamps nothing and hands leadership over (clock.go).
	MaxClockSkew time.Duration
	// ClockReportInterval is how often a voter that does not lead reports its clock to the
	// leader; a report counts for 8 intervals.
	ClockReportInterval time.Duration
	// ClockOffset shifts this voter's clock (Now) by a fixed amount: a testing aid to
	// simulate a voter whose clock is wrong (sequencer-svc --clock-offset).
	ClockOffset time.Duration

	// RPCListener, when set, is served instead of listening on RPCAddr (tests use :0).
	RPCListener net.Listener
	// TLS, when set, is this voter's cluster identity: a certificate and key it serves on
	// the RPC and Raft listeners and presents when it calls other voters (forwarded calls,
	// clock reports, join, Raft), and the cluster CA. Every caller of the RPC listener and
	// every Raft peer must present a certificate of that CA; a call without one is
	// refused before any RPC runs. nil: plaintext, anyone who reaches the port may call.
	TLS *tlsconf.Source
	// NoSync turns off fsync of the state and Raft log files: tests and benchmarks only.
	NoSync bool

	// ---- Quorum placement (placement_controller.go) ----

	// Placement runs the leader's placement controller of the quorum class's journals
	// when Placement.Nodes is set.
	Placement PlacementConfig
}

// DefaultConfig returns the defaults: id "seq-1", RPC 127.0.0.1:7070, Raft 127.0.0.1:7071,
// snapshot every 8192 entries (checked every 30 s) keeping 10240 trailing entries, 10 s
// apply timeout, 2 s leader wait, 20 ms follower read wait, Raft timeouts for voters in
// different zones (hashicorp/raft's defaults: 1 s heartbeat and election, 500 ms leader
// lease, 50 ms commit), 4096 replayable watch events, 1 s allowed clock skew with clock
// reports every 250 ms.
func DefaultConfig() Config {
	return Config{
		ID:                  "seq-1",
		RPCAddr:             "127.0.0.1:7070",
		RaftAddr:            "127.0.0.1:7071",
		SnapshotThreshold:   8192,
		SnapshotInterval:    30 * time.Second,
		TrailingLogs:        10240,
		SnapshotRetain:      2,
		ApplyTimeout:        10 * time.Second,
		LeaderWait:          2 * time.Second,
		ReadWait:            20 * time.Millisecond,
		HeartbeatTimeout:    time.Second,
		ElectionTimeout:     time.Second,
		LeaderLeaseTimeout:  500 * time.Millisecond,
		CommitTimeout:       50 * time.Millisecond,
		WatchRing:           4096,
		WatchRingEntries:    1 << 18,
		WatchBuffer:         1024,
		MaxClockSkew:        time.Second,
		ClockReportInterval: 250 * time.Millisecond,
	}
}

// FastTimeouts sets Raft timeouts suited to a single-voter group on one machine (loam dev,
// tests): leadership within tens of milliseconds of start.
func (c *Config) FastTimeouts() {
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

// Validate checks c; it fills nothing in.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...))
	}
	if c.ID == "" {
		bad("empty id")
	}
	if c.DataDir == "" {
		bad("empty data dir")
	}
	if !c.DisableRPC && c.RPCListener == nil {
		if _, _, err := net.SplitHostPort(c.RPCAddr); err != nil {
			bad("rpc addr %q: %v", c.RPCAddr, err)
		}
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		bad("raft addr %q: %v", c.RaftAddr, err)
	}
	seen := map[string]bool{c.ID: true}
	for _, p := range c.Peers {
		if p.ID == "" || seen[p.ID] {
			bad("peer id %q empty or repeated", p.ID)
		}
		seen[p.ID] = true
		if _, _, err := net.SplitHostPort(p.RaftAddr); err != nil {
			bad("peer %s raft addr %q: %v", p.ID, p.RaftAddr, err)
		}
	}
	if c.SnapshotThreshold == 0 || c.SnapshotInterval <= 0 || c.SnapshotRetain < 1 {
		bad("snapshot threshold %d, interval %s, retain %d: want > 0", c.SnapshotThreshold, c.SnapshotInterval, c.SnapshotRetain)
	}
	if c.ApplyTimeout <= 0 || c.LeaderWait <= 0 || c.ReadWait < 0 {
		bad("apply timeout %s, leader wait %s, read wait %s", c.ApplyTimeout, c.LeaderWait, c.ReadWait)
	}
	if c.DisableRPC && (len(c.Peers) > 0 || len(c.Join) > 0) {
		bad("disable rpc with peers or join: voters of a group send each other clock reports and forwarded calls over RPC")
	}
	if c.TLS != nil && (!c.TLS.HasCertificate() || !c.TLS.HasCA()) {
		bad("tls needs a certificate and the cluster CA: the sequencer admits only callers the cluster CA issued a certificate to")
	}
	if len(c.Join) > 0 && c.Bootstrap {
		bad("join and bootstrap are exclusive")
	}
	for _, a := range c.Join {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("join addr %q: %v", a, err)
		}
	}
	if c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond ||
		c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout || c.CommitTimeout <= 0 {
		bad("raft timeouts heartbeat %s election %s lease %s commit %s", c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout)
	}
	if c.MaxClockSkew < time.Millisecond || c.MaxClockSkew >= meta.StaleAfter || c.ClockReportInterval < time.Millisecond {
		bad("max clock skew %s (want 1ms..%s), clock report interval %s (want >= 1ms)", c.MaxClockSkew, meta.StaleAfter, c.ClockReportInterval)
	}
	if c.WatchRing < 1 || c.WatchBuffer < 1 || c.WatchRingEntries < 1 {
		bad("watch ring %d (%d entries), buffer %d: want >= 1", c.WatchRing, c.WatchRingEntries, c.WatchBuffer)
	}
	return errors.Join(errs...)
}

func (c *Config) fillRuntime() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if c.RaftLogOutput == nil {
		c.RaftLogOutput = os.Stderr
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if off := c.ClockOffset; off != 0 {
		now := c.Now
		c.Now = func() time.Time { return now().Add(off) }
	}
}

package devcluster

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// QuorumConfig is the quorum class of the embedded cluster (loam dev --journal-port):
// its journal has three members, all in this process: the log node's and two more
// (dev-journal-2, dev-journal-3), each with its own Raft listener and fsynced log under
// <DataDir>/journal/<member>, so a quorum produce is acknowledged on two fsyncs.
type QuorumConfig struct {
	// Port is the first member's journal Raft port (the log node's); the others take
	// Port+1 and Port+2. 0: the class is not served.
	Port int
	Host string // default 127.0.0.1
}

// quorumPeers are the two journal members the embedded cluster runs besides its log node.
type quorumPeers struct {
	hosts []*journal.Host
	muxes []*journal.Mux
}

func (q *quorumPeers) close() {
	if q == nil {
		return
	}
	for i, h := range q.hosts {
		h.Close()
		q.muxes[i].Close()
	}
}

// startQuorum starts the two extra members and returns the log node's quorum settings.
// Whichever member leads offloads to bucket, committing to the sequencer's index mc.
func startQuorum(cfg QuorumConfig, dir, nodeID string, bucket objstore.Bucket, mc meta.Client) (*quorumPeers, node.QuorumConfig, error) {
	if cfg.Port == 0 {
		return nil, node.QuorumConfig{}, nil
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ids := []string{nodeID, "dev-journal-2", "dev-journal-3"}
	voters := make([]node.JournalVoter, 3)
	servers := make([]raft.Server, 3)
	for i, id := range ids {
		addr := net.JoinHostPort(host, strconv.Itoa(cfg.Port+i))
		voters[i] = node.JournalVoter{ID: id, Addr: addr}
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr + "/j0")}
	}
	q := &quorumPeers{}
	for i := 1; i < 3; i++ {
		mux, err := journal.ListenMux(voters[i].Addr, "")
		if err != nil {
			q.close()
			return nil, node.QuorumConfig{}, err
		}
		hc := journal.HostConfig{NodeID: ids[i], Dir: filepath.Join(dir, "journal", ids[i]), Mux: mux,
			Member: journal.Config{LogOutput: io.Discard}}
		if idx, ok := mc.(journal.OffloadIndex); ok {
			hc.Offload = &journal.OffloadConfig{Bucket: bucket, Index: idx}
		}
		h, err := journal.NewHost(hc)
		if err != nil {
			mux.Close()
			q.close()
			return nil, node.QuorumConfig{}, err
		}
		q.hosts, q.muxes = append(q.hosts, h), append(q.muxes, mux)
		if _, err := h.Start("j0", servers, true); err != nil {
			q.close()
			return nil, node.QuorumConfig{}, fmt.Errorf("devcluster: journal member %s: %w", ids[i], err)
		}
	}
	return q, node.QuorumConfig{Addr: voters[0].Addr, Dir: filepath.Join(dir, "journal", nodeID), Journal: "j0", Voters: voters}, nil
}

package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrClusterFile: cluster.json is missing or malformed.
var ErrClusterFile = errors.New("supervisor: bad cluster file")

// FileName is the cluster description the supervisor keeps in its data directory.
const FileName = "cluster.json"

// ClusterFile is cluster.json: every child with its current pid (0 while it is down) and
// addresses. The supervisor rewrites it, atomically, whenever a child starts or exits.
type ClusterFile struct {
	Sequencers []SequencerInfo `json:"sequencers"`
	Nodes      []NodeInfo      `json:"nodes"`
	// CA is the certificate the children's TLS certificates chain to (loam dev --tls):
	// the nodes serve https:// and gRPC over TLS; empty: plaintext.
	CA string `json:"ca,omitempty"`
	// Coord is the coordination store the supervisor serves to the log nodes, or "".
	Coord string `json:"coord,omitempty"`
}

// NodeURL is the base URL of node n's native HTTP API.
func (cf ClusterFile) NodeURL(n NodeInfo) string {
	if cf.CA != "" {
		return "https://" + n.HTTP
	}
	return "http://" + n.HTTP
}

// SequencerInfo is one sequencer voter in cluster.json.
type SequencerInfo struct {
	ID   string `json:"id"`
	PID  int    `json:"pid"`
	RPC  string `json:"rpc"`  // gRPC address (loam.meta.v1.Sequencer)
	Raft string `json:"raft"` // Raft transport address
	Zone string `json:"zone,omitempty"`
}

// NodeInfo is one log node in cluster.json.
type NodeInfo struct {
	ID   string `json:"id"`
	PID  int    `json:"pid"`
	HTTP string `json:"http"` // native HTTP API address
	Zone string `json:"zone"`
}

// ReadClusterFile reads and checks <dataDir>/cluster.json.
func ReadClusterFile(dataDir string) (ClusterFile, error) {
	path := filepath.Join(dataDir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return ClusterFile{}, fmt.Errorf("%w: %s: %w", ErrClusterFile, path, err)
	}
	var cf ClusterFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return ClusterFile{}, fmt.Errorf("%w: %s: %w", ErrClusterFile, path, err)
	}
	for _, s := range cf.Sequencers {
		if s.ID == "" || s.RPC == "" || s.Raft == "" || s.PID < 0 {
			return ClusterFile{}, fmt.Errorf("%w: %s: sequencer %+v incomplete", ErrClusterFile, path, s)
		}
	}
	for _, n := range cf.Nodes {
		if n.ID == "" || n.HTTP == "" || n.PID < 0 {
			return ClusterFile{}, fmt.Errorf("%w: %s: node %+v incomplete", ErrClusterFile, path, n)
		}
	}
	return cf, nil
}

// writeFileAtomic writes b to path through a temporary file in the same directory and a
// rename, so a reader sees the old file or the new one, never a part.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return werr
	}
	return nil
}

package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/sequencer-svc/raftlog"
)

// RestoreDataDir prepares dataDir, which must hold no sequencer state, as the data dir of
// voter id (Raft address raftAddr) of a new group made of it and peers, from a backup
// (EncodeBackup's bytes). Start it without Bootstrap (and the peers with empty data dirs):
// it restores the state machine from the backup, leads the new group once a majority of
// it runs, and sends the peers the snapshot. Everything committed after the backup is
// not in it.
func RestoreDataDir(dataDir, id, raftAddr string, peers []Peer, backup []byte) (BackupHeader, error) {
	h, snap, err := DecodeBackup(backup)
	if err != nil {
		return h, err
	}
	for _, name := range []string{"raft.db", "state.db", "snapshots"} {
		if _, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			return h, fmt.Errorf("server: restore: %s already holds sequencer state (%s): restore into an empty data dir", dataDir, name)
		} else if !errors.Is(err, os.ErrNotExist) {
			return h, err
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return h, err
	}
	servers := []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr)}}
	for _, p := range peers {
		if p.ID == id {
			return h, fmt.Errorf("server: restore: peer %s is this voter", p.ID)
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	snaps, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		return h, err
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, h.Index, h.Term, raft.Configuration{Servers: servers}, h.Index, trans)
	if err != nil {
		return h, fmt.Errorf("server: restore: %w", err)
	}
	if _, err := sink.Write(snap); err != nil {
		sink.Cancel()
		return h, fmt.Errorf("server: restore: %w", err)
	}
	if err := sink.Close(); err != nil {
		return h, fmt.Errorf("server: restore: %w", err)
	}
	// The new group's terms continue the backup's, so no entry is ever appended with a term
	// below the snapshot's.
	store, err := raftlog.Open(filepath.Join(dataDir, "raft.db"), raftlog.Options{})
	if err != nil {
		return h, err
	}
	if err := store.SetUint64([]byte("CurrentTerm"), h.Term); err != nil {
		store.Close()
		return h, err
	}
	return h, store.Close()
}

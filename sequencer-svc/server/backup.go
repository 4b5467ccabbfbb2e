package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/shared/objstore"
)

// A backup is a Raft snapshot of the state machine put in the bucket, so that losing every
// voter's volume loses at most what was committed after the newest backup (the recovery
// point: the backup interval). Backup objects are under BackupPrefix, named
// <20-digit index>-<unix seconds>.snap so that their names sort by index:
//
//	{"format":"loam-sequencer-backup","version":1,"index":I,"term":T,"created":"RFC3339","size":N,"sha256":"hex"}\n
//	<N bytes: the state machine's snapshot, as Raft stores it>
//
// RestoreDataDir turns one into the data dir of the first voter of a new group.
const BackupPrefix = "backups/sequencer/"

// BackupHeader is a backup's first line.
type BackupHeader struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Index   uint64    `json:"index"`
	Term    uint64    `json:"term"`
	Created time.Time `json:"created"`
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256"`
}

const backupFormat = "loam-sequencer-backup"

// ErrBackup marks a malformed or corrupt backup.
var ErrBackup = errors.New("server: bad backup")

// EncodeBackup writes a backup of snapshot (index, term) to w.
func EncodeBackup(w io.Writer, index, term uint64, created time.Time, snapshot []byte) error {
	sum := sha256.Sum256(snapshot)
	h, err := json.Marshal(BackupHeader{Format: backupFormat, Version: 1, Index: index, Term: term, Created: created.UTC(),
		Size: int64(len(snapshot)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return err
	}
	if _, err := w.Write(append(h, '\n')); err != nil {
		return err
	}
	_, err = w.Write(snapshot)
	return err
}

// DecodeBackup reads a backup, checking its header, size and checksum.
func DecodeBackup(b []byte) (BackupHeader, []byte, error) {
	var h BackupHeader
	line, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok || len(line) > 4096 {
		return h, nil, fmt.Errorf("%w: no header line", ErrBackup)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, nil, fmt.Errorf("%w: header: %v", ErrBackup, err)
	}
	switch {
	case h.Format != backupFormat:
		return h, nil, fmt.Errorf("%w: format %q, want %q", ErrBackup, h.Format, backupFormat)
	case h.Version != 1:
		return h, nil, fmt.Errorf("%w: version %d, want 1", ErrBackup, h.Version)
	case h.Index == 0:
		return h, nil, fmt.Errorf("%w: index 0", ErrBackup)
	case h.Size != int64(len(rest)):
		return h, nil, fmt.Errorf("%w: %d snapshot bytes, header says %d (truncated?)", ErrBackup, len(rest), h.Size)
	}
	sum := sha256.Sum256(rest)
	if hex.EncodeToString(sum[:]) != h.SHA256 {
		return h, nil, fmt.Errorf("%w: sha256 mismatch (corrupt)", ErrBackup)
	}
	return h, rest, nil
}

// BackupKey is the object name of a backup at index taken at t.
func BackupKey(index uint64, t time.Time) string {
	return fmt.Sprintf("%s%020d-%d.snap", BackupPrefix, index, t.Unix())
}

// Backup takes a Raft snapshot now and puts it in b (only the leader backs up in
// RunBackups, but any voter can). It answers the object's key.
func (n *Node) Backup(ctx context.Context, b objstore.Bucket) (string, error) {
	fut := n.raft.Snapshot()
	if err := fut.Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return "", fmt.Errorf("server: backup: snapshot: %w", err)
	}
	var meta *raft.SnapshotMeta
	var rc io.ReadCloser
	var err error
	if fut.Error() == nil {
		meta, rc, err = fut.Open()
	} else { // nothing new since the last snapshot: back that one up
		meta, rc, err = n.latestSnapshot()
	}
	if err != nil {
		return "", fmt.Errorf("server: backup: open snapshot: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return "", fmt.Errorf("server: backup: read snapshot: %w", err)
	}
	var buf bytes.Buffer
	now := time.Now()
	if err := EncodeBackup(&buf, meta.Index, meta.Term, now, data); err != nil {
		return "", err
	}
	key := BackupKey(meta.Index, now)
	if err := b.Put(ctx, key, buf.Bytes()); err != nil {
		return "", fmt.Errorf("server: backup: put %s: %w", key, err)
	}
	n.log.Info("backed up the state machine", "key", key, "index", meta.Index, "bytes", buf.Len())
	return key, nil
}

func (n *Node) latestSnapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	list, err := n.snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(list) == 0 {
		return nil, nil, errors.New("no snapshot yet")
	}
	return n.snaps.Open(list[0].ID)
}

// BackupConfig schedules backups.
type BackupConfig struct {
	Bucket   objstore.Bucket
	Interval time.Duration // default 1 h
	Keep     int           // newest backups kept; older ones are deleted; default 24
	Now      <-chan struct{}
}

// RunBackups backs up every Interval while this voter leads, and whenever Now delivers,
// until ctx ends; it keeps the Keep newest backups.
func (n *Node) RunBackups(ctx context.Context, cfg BackupConfig) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Hour
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 24
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		forced := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-cfg.Now:
			forced = true
		}
		if !forced && !n.IsLeader() {
			continue
		}
		if _, err := n.Backup(ctx, cfg.Bucket); err != nil {
			n.log.Error("backup failed", "err", err)
			continue
		}
		if err := PruneBackups(ctx, cfg.Bucket, cfg.Keep); err != nil {
			n.log.Warn("pruning old backups failed", "err", err)
		}
	}
}

// ListBackups answers the backups in b, newest (highest index) first.
func ListBackups(ctx context.Context, b objstore.Bucket) ([]string, error) {
	var keys []string
	err := b.List(ctx, BackupPrefix, func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, ".snap") {
			keys = append(keys, o.Key)
		}
		return nil
	})
	sort.Sort(sort.Reverse(sort.StringSlice(keys)))
	return keys, err
}

// PruneBackups deletes all but the keep newest backups.
func PruneBackups(ctx context.Context, b objstore.Bucket, keep int) error {
	keys, err := ListBackups(ctx, b)
	if err != nil {
		return err
	}
	for len(keys) > keep {
		if err := b.Delete(ctx, keys[len(keys)-1]); err != nil {
			return err
		}
		keys = keys[:len(keys)-1]
	}
	return nil
}

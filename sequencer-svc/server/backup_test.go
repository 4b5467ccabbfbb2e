package server

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// TestBackupFormat pins the backup layout and its checks.
func TestBackupFormat(t *testing.T) {
	var buf bytes.Buffer
	if err := EncodeBackup(&buf, 42, 7, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), []byte("state")); err != nil {
		t.Fatal(err)
	}
	const golden = `{"format":"loam-sequencer-backup","version":1,"index":42,"term":7,"created":"2026-12-01T12:00:00Z","size":5,"sha256":"4ba69735ca53765ed6a709edb56c6ea236b7193a3b29a6b390c346f0f4340e4e"}` + "\nstate"
	h, snap, err := DecodeBackup(buf.Bytes())
	if err != nil || h.Index != 42 || h.Term != 7 || string(snap) != "state" {
		t.Fatalf("%+v %q %v", h, snap, err)
	}
	if got := buf.String(); got != golden {
		t.Errorf("header:\n%s\nwant:\n%s", got, golden)
	}
	b := buf.Bytes()
	for name, bad := range map[string][]byte{
		"truncated": b[:len(b)-1],
		"corrupt":   append(append([]byte{}, b[:len(b)-1]...), 'X'),
		"no header": []byte("state"),
		"format":    []byte(`{"format":"x","version":1,"index":1,"size":0,"sha256":""}` + "\n"),
	} {
		if _, _, err := DecodeBackup(bad); !errors.Is(err, ErrBackup) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if k := BackupKey(42, time.Unix(1796126400, 0)); k != "backups/sequencer/00000000000000000042-1796126400.snap" {
		t.Errorf("key %s", k)
	}
}

// TestRestoreNewGroupFromBackup: a group's state backed up to the bucket comes back as a
// new three-voter group on empty volumes: streams, offsets and index entries are there, the
// new group commits on, and the two other voters receive the state from the restored one.
func TestRestoreNewGroupFromBackup(t *testing.T) {
	ctx := ctxT(t)
	bucket := objstore.NewMem()
	old := startNode(t, testConfig(t, t.TempDir()))
	if err := old.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := old.CreateStream(ctx, meta.StreamConfig{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := old.CommitWal(ctx, meta.CommitWal{Object: "wal/o1", CreatedMs: now, StampMs: now,
		Chunks: []meta.Chunk{{StreamID: s.ID, Partition: 1, Records: 5, Length: 10}}}); err != nil {
		t.Fatal(err)
	}
	key, err := old.Backup(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	// A commit after the backup is past the recovery point.
	if _, err := old.CommitWal(ctx, meta.CommitWal{Object: "wal/o2", CreatedMs: now, StampMs: now,
		Chunks: []meta.Chunk{{StreamID: s.ID, Partition: 1, Records: 3, Length: 10}}}); err != nil {
		t.Fatal(err)
	}
	old.Close() // every volume is lost
	keys, err := ListBackups(ctx, bucket)
	if err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("backups %v %v", keys, err)
	}
	backup, err := bucket.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	var cfgs []Config
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(t, t.TempDir())
		cfg.ID, cfg.Bootstrap = id, false
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfgs = append(cfgs, cfg)
	}
	peers := []Peer{{ID: "b", RaftAddr: cfgs[1].RaftAddr}, {ID: "c", RaftAddr: cfgs[2].RaftAddr}}
	if _, err := RestoreDataDir(cfgs[0].DataDir, "a", cfgs[0].RaftAddr, peers, backup); err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreDataDir(cfgs[0].DataDir, "a", cfgs[0].RaftAddr, peers, backup); err == nil {
		t.Fatal("restored over existing state")
	}
	var nodes []*Node
	for _, cfg := range cfgs {
		n := startNode(t, cfg)
		defer n.Close()
		nodes = append(nodes, n)
	}
	var leader *Node
	for leader == nil {
		if ctx.Err() != nil {
			t.Fatal("the restored group elects no leader")
		}
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := leader.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	st, parts, err := leader.GetStream(ctx, meta.DefaultNS, "orders")
	if err != nil || st.ID != s.ID || parts[1].HighWatermark != 5 {
		t.Fatalf("restored stream %+v %+v %v (want high watermark 5: the backup's)", st, parts, err)
	}
	res, err := leader.CommitWal(ctx, meta.CommitWal{Object: "wal/o3", CreatedMs: now, StampMs: now,
		Chunks: []meta.Chunk{{StreamID: s.ID, Partition: 1, Records: 2, Length: 10}}})
	if err != nil || res.BaseOffsets[0] != 5 {
		t.Fatalf("commit on the restored group: %+v %v", res, err)
	}
	for _, n := range nodes {
		for {
			es, ps, err := NewLocalClient(n).Lookup(ctx, s.ID, 1, 0, 10)
			if err == nil && ps.HighWatermark == 7 && len(es) == 2 && es[0].Object == "wal/o1" && es[1].Object == "wal/o3" {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("voter %s: %+v %+v %v", n.cfg.ID, es, ps, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

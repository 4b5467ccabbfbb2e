package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	bolt "go.etcd.io/bbolt"
)

// Snapshot stream layout (version 1), all integers big-endian:
//
//	magic "LOAMSNAP" (8) | version u32 (=1) | size u64 | bbolt file (size bytes) | crc32c u32
//
// The CRC32C (Castagnoli) covers the bbolt bytes.
const (
	snapMagic   = "LOAMSNAP"
	snapVersion = 1
	snapHeader  = 8 + 4 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot captures the state as of the last applied batch (raft.FSM). It opens a bbolt
// read transaction that Persist streams with tx.WriteTo; Release ends it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, fmt.Errorf("fsm: snapshot: closed: %w", meta.ErrUnavailable)
	}
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("fsm: snapshot: %w", err)
	}
	return &snapshot{tx: tx}, nil
}

type snapshot struct{ tx *bolt.Tx }

// Persist writes the snapshot stream to sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.tx); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release ends the read transaction.
func (s *snapshot) Release() { _ = s.tx.Rollback() }

// WriteSnapshot writes tx's database as a snapshot stream to w.
func WriteSnapshot(w io.Writer, tx *bolt.Tx) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var hdr [snapHeader]byte
	copy(hdr[:], snapMagic)
	binary.BigEndian.PutUint32(hdr[8:], snapVersion)
	binary.BigEndian.PutUint64(hdr[12:], uint64(tx.Size()))
	if _, err := bw.Write(hdr[:]); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	h := crc32.New(castagnoli)
	n, err := tx.WriteTo(io.MultiWriter(bw, h))
	if err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	if n != tx.Size() {
		return fmt.Errorf("fsm: write snapshot: wrote %d bytes of %d", n, tx.Size())
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, h.Sum32())); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	return nil
}

// Restore replaces the state with a snapshot stream (raft.FSM). The stream is copied to a
// temporary file and checked (magic, version, size, CRC32C, format) before the database is
// swapped, so a bad snapshot leaves the state as it was. Publish then receives one Reset
// event at the restored applied index.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + ".restore"
	if err := copySnapshot(rc, tmp); err != nil {
		_ = removeFile(tmp)
		return err
	}
	// Check the candidate opens as a v1 state database.
	probe := &FSM{path: tmp, opts: f.opts}
	db, err := probe.openDB(true)
	if err != nil {
		_ = removeFile(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}
	if err := db.Close(); err != nil {
		_ = removeFile(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}

	f.mu.Lock()
	if f.db != nil {
		if err := f.db.Close(); err != nil {
			f.mu.Unlock()
			return fmt.Errorf("fsm: restore: close current state: %w", err)
		}
		f.db = nil
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.mu.Unlock()
		return fmt.Errorf("fsm: restore: %w", err)
	}
	db, err = f.openDB(true)
	if err != nil {
		f.mu.Unlock()
		return fmt.Errorf("fsm: restore: reopen: %w", err)
	}
	f.db = db
	if err := f.loadTails(); err != nil {
		f.db.Close()
		f.db = nil // Apply panics rather than run on a state it cannot read
		f.mu.Unlock()
		return fmt.Errorf("fsm: restore: %w", err)
	}
	f.mu.Unlock()

	if f.opts.Publish != nil {
		f.opts.Publish([]meta.Event{{AppliedIndex: f.AppliedIndex(), Reset: true, StreamsChanged: true}})
	}
	return nil
}

func copySnapshot(r io.Reader, path string) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [snapHeader]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("%w: snapshot header: %v", ErrCorrupt, err)
	}
	if string(hdr[:8]) != snapMagic {
		return fmt.Errorf("%w: snapshot magic %q", ErrCorrupt, hdr[:8])
	}
	if v := binary.BigEndian.Uint32(hdr[8:]); v != snapVersion {
		return fmt.Errorf("%w: snapshot version %d, want %d", ErrCorrupt, v, snapVersion)
	}
	size := int64(binary.BigEndian.Uint64(hdr[12:]))
	if size <= 0 {
		return fmt.Errorf("%w: snapshot size %d", ErrCorrupt, size)
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(br, size))
	if err == nil && n != size {
		err = fmt.Errorf("%w: snapshot truncated: %d of %d bytes", ErrCorrupt, n, size)
	}
	var trailer [4]byte
	if err == nil {
		if _, rerr := io.ReadFull(br, trailer[:]); rerr != nil {
			err = fmt.Errorf("%w: snapshot checksum: %v", ErrCorrupt, rerr)
		} else if got, want := binary.BigEndian.Uint32(trailer[:]), h.Sum32(); got != want {
			err = fmt.Errorf("%w: snapshot checksum %08x, computed %08x", ErrCorrupt, got, want)
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("fsm: restore: %w", err)
	}
	return err
}

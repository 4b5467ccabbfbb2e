package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// ErrCorrupt: a stored log entry fails its checksum or does not decode.
var ErrCorrupt = errors.New("raftlog: corrupt entry")

var (
	bLogs   = []byte("logs")
	bStable = []byte("stable")
	bMeta   = []byte("meta")
	kFormat = []byte("format")
)

const formatV1 = "loam-raftlog v1"

// Store is a raft.LogStore and raft.StableStore in one bbolt file. Every write is one
// fsynced transaction.
type Store struct {
	db *bolt.DB
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Options tune a Store. The zero value is what production wants.
type Options struct {
	NoSync bool // tests and benchmarks only
}

// Open opens or creates the store at path.
func Open(path string, opts Options) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: opts.NoSync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bMeta); m != nil {
			if got := m.Get(kFormat); string(got) != formatV1 {
				return fmt.Errorf("%w: format %q, want %q", ErrCorrupt, got, formatV1)
			}
			return nil
		}
		for _, b := range [][]byte{bLogs, bStable, bMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kFormat, []byte(formatV1))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raftlog: init %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// FirstIndex returns the first stored index, 0 when empty.
func (s *Store) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bLogs).Cursor().First(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// LastIndex returns the last stored index, 0 when empty.
func (s *Store) LastIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bLogs).Cursor().Last(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog reads entry index into l; raft.ErrLogNotFound when absent.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bLogs).Get(key(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := DecodeEntry(v, l); err != nil {
			return fmt.Errorf("raftlog: entry %d: %w", index, err)
		}
		l.Index = index
		return nil
	})
}

// StoreLog stores one entry.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one transaction.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bLogs)
		var buf []byte
		for _, l := range logs {
			buf = AppendEntry(buf[:0], l)
			// bbolt keeps a reference to the value until commit: copy it.
			if err := b.Put(key(l.Index), append([]byte(nil), buf...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftlog: store logs: %w", err)
	}
	return nil
}

// DeleteRange deletes entries min..max inclusive.
func (s *Store) DeleteRange(min, max uint64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bLogs).Cursor()
		for k, _ := c.Seek(key(min)); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftlog: delete %d..%d: %w", min, max, err)
	}
	return nil
}

// Set stores a stable value.
func (s *Store) Set(k, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bStable).Put(k, v) })
}

// Get reads a stable value; a missing key is an error whose text raft expects ("not found").
func (s *Store) Get(k []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bStable).Get(k)
		if v == nil {
			return errNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// errNotFound is the StableStore miss: raft compares its text with "not found".
var errNotFound = errors.New("not found")

// SetUint64 stores a stable integer.
func (s *Store) SetUint64(k []byte, v uint64) error { return s.Set(k, key(v)) }

// GetUint64 reads a stable integer; 0 when missing.
func (s *Store) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		if errors.Is(err, errNotFound) {
			return 0, nil
		}
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable %q: %d bytes", ErrCorrupt, k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// EntrySize is the stored size of an entry's value: the Raft-log bytes it costs (plus the
// 8-byte key and bbolt's page overhead).
func EntrySize(l *raft.Log) int { return len(AppendEntry(nil, l)) }

// ---- entry codec ----

// Entry layout (version 1):
//
//	version u8 (=1) | type u8 | term uvarint | appended_at unix ns varint |
//	data length uvarint | data | extensions length uvarint | extensions | crc32c u32 BE
//
// The CRC32C (Castagnoli) covers everything before it. The index is the bbolt key.
const entryVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendEntry appends l's encoding to b.
func AppendEntry(b []byte, l *raft.Log) []byte {
	start := len(b)
	b = append(b, entryVersion, byte(l.Type))
	b = binary.AppendUvarint(b, l.Term)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(what + " past the end")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

// DecodeEntry decodes a stored entry into l (not its index). Malformed input is an
// ErrCorrupt error, never a panic.
func DecodeEntry(b []byte, l *raft.Log) error {
	if len(b) < 4 {
		return fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	body := b[:len(b)-4]
	if got, want := binary.BigEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); got != want {
		return fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	d := decoder{b: body}
	if v := d.byte1("version"); d.err == nil && v != entryVersion {
		return fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	typ := d.byte1("type")
	term := d.uvarint("term")
	at := d.varint("appended at")
	data := d.bytes("data")
	ext := d.bytes("extensions")
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return d.err
	}
	*l = raft.Log{Type: raft.LogType(typ), Term: term, Data: data, Extensions: ext}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}

package fsm

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

type memSink struct{ *bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// dumpState prints every bucket's keys and values, for equality checks.
func dumpState(t *testing.T, f *FSM) string {
	t.Helper()
	var b strings.Builder
	err := f.view(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			fmt.Fprintf(&b, "[%s]\n", name)
			if err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&b, "%x=%x\n", k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func protoUnmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }

// logicalState prints the state as the API sees it, whatever its physical layout (index
// blocks or pending commits, settled offsets, the pending count): for comparing a migrated
// database with one built by the current version.
func logicalState(t *testing.T, f *FSM) string {
	t.Helper()
	var b strings.Builder
	skip := map[string]bool{string(bGroups): true, string(bBlocks): true, string(bPending): true}
	err := f.view(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if skip[string(name)] {
				continue
			}
			fmt.Fprintf(&b, "[%s]\n", name)
			if err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				if string(name) == string(bMeta) && string(k) == string(kPendingN) {
					return nil
				}
				fmt.Fprintf(&b, "%x=%x\n", k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "[partitions]\n")
		return tx.Bucket(bGroups).ForEach(func(k, v []byte) error {
			sts, err := groupStates(k, v, nil)
			for _, st := range sts {
				fmt.Fprintf(&b, "%+v\n", st)
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	es := allEntries(t, f)
	keys := make([]string, 0, len(es))
	for k := range es {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "[entries %x]\n", k)
		for _, e := range es[k] {
			fmt.Fprintf(&b, "%+v\n", e)
		}
	}
	return b.String()
}

// checkTails checks the in-memory pending entries against the pending bucket: reading the
// bucket again gives the same tails, records and chunk count, and the bucket holds no
// record whose chunks were all settled.
func checkTails(t *testing.T, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	tx, err := f.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n := tx.Bucket(bPending).Stats().KeyN
	fresh, err := loadTails(tx)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(fresh.recs) {
		t.Fatalf("pending bucket holds %d records, %d of them live", n, len(fresh.recs))
	}
	if fresh.chunks != f.t.chunks || len(fresh.recs) != len(f.t.recs) {
		t.Fatalf("in memory: %d chunks, %d records; in the bucket: %d, %d", f.t.chunks, len(f.t.recs), fresh.chunks, len(fresh.recs))
	}
	for _, pair := range [][2]*tails{{fresh, f.t}, {f.t, fresh}} {
		for id, ps := range pair[0].streams {
			for p := range ps {
				k := pkey{id, int32(p)}
				if tailString(pair[0], pair[0].get(k)) != tailString(pair[1], pair[1].get(k)) {
					t.Fatalf("tail of %d/%d differs: in memory %v, in the bucket %v", id, p, f.t.get(k), fresh.get(k))
				}
			}
		}
	}
	for k, r := range fresh.recs {
		if m := f.t.recs[k]; m == nil || m.live != r.live {
			t.Fatalf("record %v: in memory %+v, in the bucket %+v", k, m, r)
		}
	}
}

func tailString(t *tails, pt ptail) string {
	var b strings.Builder
	fmt.Fprint(&b, pt.es)
	for _, slot := range pt.recs {
		r := t.slab[slot]
		fmt.Fprintf(&b, " %d/%d", r.key.index, r.key.sub)
	}
	return b.String()
}

package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
)

// Golden files of API keys and namespace deletion (testdata/v4/, the state format is
// unchanged: the key buckets are created by the first key command), written once with
// -golden.create when absent and never regenerated.

func goldenKeyCommands() map[string]*metapb.Command {
	cmds := map[string]*metapb.Command{
		"testdata/v4/create_key.cmd": CreateKey(meta.APIKey{ID: "0123456789abcdef01234567", Namespace: "team-a",
			Description: "ci", Hash: meta.KeyHash("loam_0123456789abcdef01234567_secret")}),
		"testdata/v4/create_admin_key.cmd": CreateKey(meta.APIKey{ID: "89abcdef0123456789abcdef", Admin: true,
			Hash: meta.KeyHash("loam_89abcdef0123456789abcdef_secret")}),
		"testdata/v4/revoke_key.cmd":       RevokeKey("0123456789abcdef01234567"),
		"testdata/v4/delete_namespace.cmd": DeleteNamespace("team-a"),
	}
	for _, c := range cmds {
		c.StampMs = t0 + 5
	}
	return cmds
}

func TestGoldenKeyCommands(t *testing.T) {
	for path, cmd := range goldenKeyCommands() {
		b := golden(t, path, func() []byte { b, _ := Encode(cmd); return b })
		got, err := Decode(b)
		if err != nil || got.String() != cmd.String() {
			t.Fatalf("%s: %v: %v", path, err, got)
		}
		if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", path, enc, b)
		}
	}
}

// keyHistory builds the state saved in testdata/v4/key_state.snap: namespaces team-a and
// team-b, a key of each and an admin key, the team-a key revoked, team-b deleted (its key
// revoked with it).
func keyHistory(h *harness) {
	h.apply(t0, CreateNamespace("team-a"))
	h.apply(t0, CreateNamespace("team-b"))
	h.apply(t0+1000, CreateKey(meta.APIKey{ID: "aa", Namespace: "team-a", Hash: meta.KeyHash("ka")}))
	h.apply(t0+1000, CreateKey(meta.APIKey{ID: "bb", Namespace: "team-b", Hash: meta.KeyHash("kb")}))
	h.apply(t0+1000, CreateKey(meta.APIKey{ID: "root", Admin: true, Hash: meta.KeyHash("kr")}))
	h.apply(t0+2000, RevokeKey("aa"))
	h.apply(t0+3000, DeleteNamespace("team-b"))
}

// keyState dumps the key buckets and the namespaces.
func keyState(t *testing.T, f *FSM) string {
	t.Helper()
	var b strings.Builder
	err := f.view(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bNS, bKeys, bKeyHashes} {
			fmt.Fprintf(&b, "[%s]\n", name)
			bk := tx.Bucket(name)
			if bk == nil {
				continue
			}
			if err := bk.ForEach(func(k, v []byte) error { fmt.Fprintf(&b, "%x=%x\n", k, v); return nil }); err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "count=%d\n", getU64(tx.Bucket(bMeta), kKeyCount))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGoldenKeySnapshot(t *testing.T) {
	golden(t, "testdata/v4/key_state.snap", func() []byte {
		h := newHarness(t)
		keyHistory(h)
		var buf bytes.Buffer
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Release()
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	})
	f := restoreGolden(t, "testdata/v4/key_state.snap")
	h := newHarness(t)
	keyHistory(h)
	if keyState(t, f) != keyState(t, h.f) {
		t.Fatalf("golden snapshot's keys differ from the history that made them:\n%s\nwant\n%s", keyState(t, f), keyState(t, h.f))
	}
	for _, c := range []struct {
		secret  string
		revoked bool
	}{{"ka", true}, {"kb", true}, {"kr", false}} {
		k, err := f.LookupKey(meta.KeyHash(c.secret))
		if err != nil || k.Revoked() != c.revoked {
			t.Fatalf("%s: %+v %v", c.secret, k, err)
		}
	}
	if _, err := f.LookupKey(meta.KeyHash("nope")); err == nil {
		t.Fatal("unknown key found")
	}
	ns, _ := f.ListNamespaces()
	if strings.Join(ns, ",") != "default,team-a" {
		t.Fatalf("namespaces %v", ns)
	}
}

// FuzzApplyKeys applies an arbitrary command to a state holding keys, twice, on two
// replicas: never a panic, the key count matches the records, replicas agree.
func FuzzApplyKeys(f *testing.F) {
	for _, c := range goldenKeyCommands() {
		b, _ := Encode(c)
		f.Add(b)
	}
	for _, c := range []*metapb.Command{RevokeKey(""), DeleteNamespace("default"), DeleteNamespace(""),
		CreateKey(meta.APIKey{ID: "x", Admin: true, Namespace: "team-a", Hash: []byte{1}}), authCommand(&metapb.AuthCmd{})} {
		b, _ := Encode(c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var states [2]string
		for r := range states {
			h := newHarness(t)
			keyHistory(h)
			h.f.ApplyBatch([]*raft.Log{{Index: h.index + 1, Type: raft.LogCommand, Data: b}})
			h.f.ApplyBatch([]*raft.Log{{Index: h.index + 2, Type: raft.LogCommand, Data: b}})
			keys, err := h.f.ListKeys()
			if err != nil {
				t.Fatal(err)
			}
			st := keyState(t, h.f)
			if !strings.Contains(st, fmt.Sprintf("count=%d\n", len(keys))) {
				t.Fatalf("key count differs from %d records:\n%s", len(keys), st)
			}
			states[r] = st
		}
		if states[0] != states[1] {
			t.Fatal("replicas differ")
		}
	})
}

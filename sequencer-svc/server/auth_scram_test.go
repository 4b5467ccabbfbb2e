package server

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestLookupKeyByIDThroughFollowers: a key's SCRAM verifiers are stored with it and found
// by its id, from a follower, over the local client and over gRPC.
func TestLookupKeyByIDThroughFollowers(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	fs := followersOf(nodes, leader)
	g, err := metagrpc.Dial(context.Background(), []string{fs[1].RPCAddr()}, metagrpc.WithoutLeaderHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := meta.SCRAMVerifier{Mechanism: "SCRAM-SHA-256", Salt: []byte("salt-salt-salt-1"), Iterations: 4096,
		StoredKey: bytes.Repeat([]byte{1}, 32), ServerKey: bytes.Repeat([]byte{2}, 32)}
	k := meta.APIKey{ID: "5c4a", Admin: true, Hash: meta.KeyHash("loam_5c4a_secret"), SCRAM: []meta.SCRAMVerifier{v}}
	if _, err := NewLocalClient(leader).CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	type byID interface {
		LookupKeyByID(ctx context.Context, id string) (meta.APIKey, error)
	}
	for name, c := range map[string]meta.Client{"local": NewLocalClient(fs[0]), "grpc": g} {
		l, ok := c.(byID)
		if !ok {
			t.Fatalf("%s: the client cannot look keys up by id", name)
		}
		var got meta.APIKey
		deadline := time.Now().Add(10 * time.Second)
		for {
			if got, err = l.LookupKeyByID(ctx, k.ID); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil || len(got.SCRAM) != 1 || !bytes.Equal(got.SCRAM[0].StoredKey, v.StoredKey) || got.SCRAM[0].Iterations != 4096 {
			t.Fatalf("%s: %v %+v", name, err, got.SCRAM)
		}
		if _, err := l.LookupKeyByID(ctx, "beef"); !errors.Is(err, meta.ErrKeyNotFound) {
			t.Fatalf("%s: unknown id: %v", name, err)
		}
	}
}

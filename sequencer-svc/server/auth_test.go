package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestAuthThroughFollowers runs key and namespace administration through followers only
// (the in-process client of one, a gRPC client pinned to another): writes are forwarded to
// the leader, reads answered once caught up, refusals keep their sentinels across the wire,
// and every voter ends with the same keys.
func TestAuthThroughFollowers(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	fs := followersOf(nodes, leader)
	g, err := metagrpc.Dial(context.Background(), []string{fs[1].RPCAddr()}, metagrpc.WithoutLeaderHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for name, c := range map[string]meta.Client{"local": NewLocalClient(fs[0]), "grpc": g} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ns := "team-" + name
			if err := c.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			k := meta.APIKey{ID: "id" + name, Namespace: ns, Description: "d", Hash: meta.KeyHash("secret-" + name)}
			got, err := c.CreateKey(ctx, k)
			if err != nil || got.CreatedMs == 0 || got.ID != k.ID || got.Namespace != ns {
				t.Fatalf("create key: %+v, %v", got, err)
			}
			if again, err := c.CreateKey(ctx, k); err != nil || again.CreatedMs != got.CreatedMs {
				t.Fatalf("repeated create: %+v, %v", again, err)
			}
			k2 := k
			k2.Hash = meta.KeyHash("other")
			if _, err := c.CreateKey(ctx, k2); !errors.Is(err, meta.ErrKeyExists) {
				t.Fatalf("clash: %v", err)
			}
			if _, err := c.CreateKey(ctx, meta.APIKey{ID: "x" + name, Namespace: "nosuch", Hash: meta.KeyHash("y")}); !errors.Is(err, meta.ErrNamespaceNotFound) {
				t.Fatalf("missing namespace: %v", err)
			}
			if _, err := c.CreateKey(ctx, meta.APIKey{ID: "bad id", Admin: true, Hash: meta.KeyHash("z")}); !errors.Is(err, meta.ErrInvalidArgument) {
				t.Fatalf("bad id: %v", err)
			}
			l, err := c.LookupKey(ctx, meta.KeyHash("secret-"+name))
			if err != nil || l.ID != k.ID || l.Revoked() {
				t.Fatalf("lookup: %+v, %v", l, err)
			}
			if _, err := c.LookupKey(ctx, meta.KeyHash("nope")); !errors.Is(err, meta.ErrKeyNotFound) {
				t.Fatalf("lookup unknown: %v", err)
			}
			if _, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: ns, Name: "s", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteNamespace(ctx, ns); !errors.Is(err, meta.ErrNamespaceNotEmpty) {
				t.Fatalf("delete non-empty: %v", err)
			}
			if err := c.DeleteStream(ctx, ns, "s"); err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteNamespace(ctx, ns); !errors.Is(err, meta.ErrNamespaceNotFound) {
				t.Fatalf("delete again: %v", err)
			}
			if l, err := c.LookupKey(ctx, meta.KeyHash("secret-"+name)); err != nil || !l.Revoked() {
				t.Fatalf("the deleted namespace's key: %+v, %v", l, err)
			}
			if err := c.RevokeKey(ctx, k.ID); err != nil {
				t.Fatalf("revoke a revoked key: %v", err)
			}
			if err := c.RevokeKey(ctx, "nosuch"); !errors.Is(err, meta.ErrKeyNotFound) {
				t.Fatalf("revoke unknown: %v", err)
			}
			keys, err := c.ListKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, kk := range keys {
				if kk.Hash != nil {
					t.Fatalf("list shows a hash: %+v", kk)
				}
				found = found || kk.ID == k.ID
			}
			if !found {
				t.Fatalf("list: %+v", keys)
			}
		})
	}
	// Every voter holds the same keys.
	want, _ := leader.fsm.ListKeys()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for {
			got, _ := n.fsm.ListKeys()
			if len(got) == len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("voter %s holds %d keys, leader %d", n.cfg.ID, len(got), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestSchemasThroughFollowers creates an arrow stream and evolves its schema through
// followers only (the in-process client of one, a gRPC client pinned to another): writes
// are forwarded to the leader, refusals keep their sentinels across the wire.
func TestSchemasThroughFollowers(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	fs := followersOf(nodes, leader)
	g, err := metagrpc.Dial(context.Background(), []string{fs[1].RPCAddr()}, metagrpc.WithoutLeaderHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const v1 = `{"fields":[{"name":"id","type":"int64","nullable":false}],"key":"id"}`
	const v2 = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"n","type":"utf8","nullable":true}],"key":"id"}`
	for name, c := range map[string]meta.Client{"local": NewLocalClient(fs[0]), "grpc": g} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sc, ok := c.(meta.SchemaClient)
			if !ok {
				t.Fatalf("%T is not a meta.SchemaClient", c)
			}
			s, first, err := sc.CreateArrowStream(ctx, meta.StreamConfig{Namespace: "default", Name: "a-" + name, Partitions: 2}, []byte(v1))
			if err != nil || s.ID == 0 || s.Encoding != meta.EncodingArrow || first.Version != 1 || first.StreamID != s.ID {
				t.Fatalf("create: %+v %+v %v", s, first, err)
			}
			if _, _, err := sc.CreateArrowStream(ctx, meta.StreamConfig{Namespace: "default", Name: "a-" + name, Partitions: 2}, []byte(v1)); !errors.Is(err, meta.ErrStreamExists) {
				t.Fatalf("second create: %v", err)
			}
			next, err := sc.PutSchema(ctx, meta.PutSchema{Namespace: "default", Stream: "a-" + name, Schema: []byte(v2), ExpectVersion: 1})
			if err != nil || next.Version != 2 {
				t.Fatalf("put: %+v %v", next, err)
			}
			_, err = sc.PutSchema(ctx, meta.PutSchema{Namespace: "default", Stream: "a-" + name, Schema: []byte(v1), ExpectVersion: 2})
			if !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), `column "n" removed`) {
				t.Fatalf("breaking put: %v", err)
			}
			got, err := sc.GetSchema(ctx, s.ID, 0)
			if err != nil || got.Version != 2 || !strings.Contains(string(got.Schema), `"n"`) {
				t.Fatalf("get latest: %+v %v", got, err)
			}
			if _, err := sc.GetSchema(ctx, s.ID, 9); !errors.Is(err, meta.ErrSchemaNotFound) {
				t.Fatalf("get missing: %v", err)
			}
		})
	}
}

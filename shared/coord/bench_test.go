package coord_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/tests/testserver"
)

// Latency of one call, sequential: bbolt (fsync per write) and DynamoDB on moto_server
// (a Python process on loopback; correctness, not a benchmark of DynamoDB).
func BenchmarkBolt(b *testing.B) {
	s, err := coord.NewBolt(filepath.Join(b.TempDir(), "coord.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchStore(b, s)
}

func BenchmarkDynamoMoto(b *testing.B) {
	url := testserver.StartMoto(b)
	s, err := coord.NewDynamo(b.Context(), dynamoConfig(url))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchStore(b, s)
}

func benchStore(b *testing.B, s coord.Store) {
	ctx := b.Context()
	b.Run("Put", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := s.Put(ctx, coord.Item{PK: "b", SK: strconv.Itoa(i % 64), Attrs: map[string]string{"a": "x"}}, coord.Condition{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := s.Get(ctx, "b", strconv.Itoa(i%64)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Add", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Add(ctx, "b", "counter", "n", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Query64", func(b *testing.B) {
		for b.Loop() {
			if err := s.Query(ctx, "b", "", func(coord.Item) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	n := coord.Notifications{Store: s}
	b.Run("Claim", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if first, err := n.Claim(ctx, "obj/"+strconv.Itoa(i), time.Minute); err != nil || !first {
				b.Fatal(first, err)
			}
		}
	})
}

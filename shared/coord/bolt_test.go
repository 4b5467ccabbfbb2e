package coord_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/coord/coordtest"
)

func newBolt(t *testing.T, opts ...coord.Option) coord.Store {
	t.Helper()
	s, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBolt(t *testing.T) {
	coordtest.Run(t, newBolt)
}

func TestBoltReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "coord.db")
	s, err := coord.NewBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	put, err := s.Put(ctx, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"a": "1"}, Counters: map[string]int64{"n": 3}}, coord.IfAbsent)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = coord.NewBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, "p", "k")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != put.Version || got.Attrs["a"] != "1" || got.Counters["n"] != 3 {
		t.Fatalf("after reopen: %+v, want %+v", got, put)
	}
	if _, err := s.Put(ctx, coord.Item{PK: "p", SK: "k"}, coord.IfVersion(put.Version)); err != nil {
		t.Fatalf("IfVersion after reopen: %v", err)
	}
}

func TestBoltSweep(t *testing.T) {
	ctx := t.Context()
	clk := coordtest.NewClock(time.Unix(1_900_000_000, 0))
	s, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"), coord.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(pk, sk string, ttl time.Duration) {
		t.Helper()
		it := coord.Item{PK: pk, SK: sk}
		if ttl > 0 {
			it.ExpiresAt = clk.Now().Add(ttl)
		}
		if _, err := s.Put(ctx, it, coord.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "short1", time.Second)
	put("a", "short2", time.Second)
	put("a", "long", time.Hour)
	put("a", "never", 0)
	put("b", "short", time.Second) // its partition empties
	for i := range 30 {
		put("c", fmt.Sprintf("k%02d", i), time.Second)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep before expiry = %d, %v", n, err)
	}
	clk.Advance(2 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 33 {
		t.Fatalf("Sweep = %d, %v; want 33", n, err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v", n, err)
	}
	var got []string
	for _, pk := range []string{"a", "b", "c"} {
		if err := s.Query(ctx, pk, "", func(it coord.Item) error {
			got = append(got, it.PK+"/"+it.SK)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "a/long" || got[1] != "a/never" {
		t.Fatalf("left after Sweep: %v", got)
	}
	// A swept partition takes new items.
	put("b", "again", 0)
	if _, err := s.Get(ctx, "b", "again"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Sweep(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Sweep after Close: %v", err)
	}
}

func TestBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "coord.db")
	s, err := coord.NewBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Fatalf("Path = %q", s.Path())
	}
	defer func(d time.Duration) { *coord.BoltOpenTimeout = d }(*coord.BoltOpenTimeout)
	*coord.BoltOpenTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s2, err := coord.NewBolt(path)
		if err == nil {
			s2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a second NewBolt of a file in use succeeded")
		}
	case <-ctx.Done():
		t.Fatal("a second NewBolt of a file in use hung")
	}
}

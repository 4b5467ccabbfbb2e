package coord

import (
	"context"
	"path/filepath"
	"testing"
)

func TestCountingCountsRequests(t *testing.T) {
	b, err := NewBolt(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := NewCounting(b)
	ctx := context.Background()
	for _, sk := range []string{"a", "b", "c"} {
		if _, err := c.Put(ctx, Item{PK: "p", SK: sk}, Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Add(ctx, "p", "n", "x", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "p", "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Query(ctx, "p", "", func(Item) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Query(ctx, "none", "", func(Item) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "p", "a", Condition{}); err != nil {
		t.Fatal(err)
	}
	// 3 puts + add + delete; get + query of 4 items + empty query (1).
	if w, r := c.Counts(); w != 5 || r != 6 {
		t.Fatalf("writes %d reads %d, want 5 and 6", w, r)
	}
}

package reader

import (
	"context"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// TestWaitApplied: WaitApplied returns once a watch event at or past the index is applied
// (a Reset counts), and false when its context ends first; Applied never moves back.
func TestWaitApplied(t *testing.T) {
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: struct{ meta.Client }{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Applied() != 0 || !r.WaitApplied(context.Background(), 0) {
		t.Fatal("a fresh reader covers index 0 only")
	}
	done := make(chan bool)
	go func() { done <- r.WaitApplied(context.Background(), 7) }()
	r.Apply(meta.Event{AppliedIndex: 5})
	select {
	case <-done:
		t.Fatal("WaitApplied(7) returned at index 5")
	case <-time.After(20 * time.Millisecond):
	}
	r.Apply(meta.Event{AppliedIndex: 9, Reset: true})
	if !<-done || r.Applied() != 9 {
		t.Fatalf("after index 9: applied %d", r.Applied())
	}
	r.Apply(meta.Event{AppliedIndex: 3})
	if r.Applied() != 9 {
		t.Fatalf("applied moved back to %d", r.Applied())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r.WaitApplied(ctx, 10) {
		t.Fatal("WaitApplied(10) reported success at index 9")
	}
}

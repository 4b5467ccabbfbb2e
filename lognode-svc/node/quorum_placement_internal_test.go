package node

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/shared/meta"
)

// placementReadings answers ListJournals with each of its readings in turn.
type placementReadings struct {
	meta.Client
	readings []meta.Placement
}

func (r *placementReadings) ListJournals(context.Context) (meta.Placement, error) {
	p := r.readings[0]
	if len(r.readings) > 1 {
		r.readings = r.readings[1:]
	}
	return p, nil
}

// A stale reading of the placement (an older epoch than one the node acted on) is not
// acted on: the node keeps the member a newer epoch gave it.
func TestPlacementIgnoresStaleReadings(t *testing.T) {
	mux, err := journal.ListenMux("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mux.Close() })
	host, err := journal.NewHost(journal.HostConfig{NodeID: "n1", Dir: t.TempDir(), Mux: mux,
		Member: journal.Config{NoSync: true, LogOutput: io.Discard}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	q := &quorum{mux: mux, host: host, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m := func(n string) meta.JournalMember { return meta.JournalMember{Node: n, Addr: "127.0.0.1:1"} }
	newer := meta.Journal{ID: "j1", Epoch: 2, Members: []meta.JournalMember{m("n0"), m("n1"), m("n2")}}
	older := meta.Journal{ID: "j1", Epoch: 1, Members: []meta.JournalMember{m("n0"), m("n9"), m("n2")}}
	p := &placement{q: q, nodeID: "n1", meta: &placementReadings{readings: []meta.Placement{{Journals: []meta.Journal{newer}}, {Journals: []meta.Journal{older}}}},
		kick: make(chan struct{}, 1), epochs: map[string]uint64{}}
	p.view.Store(&placementView{})
	ctx := context.Background()
	if err := p.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if host.Member("j1") == nil {
		t.Fatal("no member after epoch 2 listed the node")
	}
	if err := p.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if host.Member("j1") == nil {
		t.Fatal("a stale reading (epoch 1) stopped the member epoch 2 gave the node")
	}
}

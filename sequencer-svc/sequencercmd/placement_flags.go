package sequencercmd

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/tlsconf"
)

// placementFlags are the quorum placement controller's flags (docs/quorum.md): the
// coordination store whose node registry the log nodes heartbeat into, and the
// controller's timings.
type placementFlags struct {
	coord        string
	replaceAfter time.Duration
	interval     time.Duration
	store        coord.Store
}

func (f *placementFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.coord, "coord", "", "coordination store of the log nodes' registry (dynamodb://TABLE?region=..., http://HOST:PORT as loam dev serves it, bolt:///PATH): the leader creates the quorum class's journals from the live log nodes with a journal listener and replaces lost members; empty: no placement controller")
	fs.DurationVar(&f.replaceAfter, "journal-replace-after", 5*time.Minute, "how long a journal member's log node must be missing from the registry before the placement controller replaces it")
	fs.DurationVar(&f.interval, "placement-interval", 2*time.Second, "how often the leader's placement controller looks at the registry and the journals")
}

// apply opens the coordination store and sets cfg.Placement (nothing without --coord).
func (f *placementFlags) apply(ctx context.Context, cfg *server.Config) error {
	if f.coord == "" {
		return nil
	}
	s, err := openCoord(ctx, f.coord, cfg.TLS)
	if err != nil {
		return err
	}
	f.store = s
	reg := coord.Registry{Store: s}
	cfg.Placement = server.PlacementConfig{Nodes: RegistryNodes(reg), ReplaceAfter: f.replaceAfter, Interval: f.interval}
	return nil
}

func (f *placementFlags) close() {
	if f.store != nil {
		f.store.Close()
	}
}

// RegistryNodes lists a node registry's live log nodes for the placement controller.
func RegistryNodes(reg coord.Registry) server.NodeLister {
	return func(ctx context.Context) ([]server.LiveNode, error) {
		ns, err := reg.Live(ctx, "")
		if err != nil {
			return nil, err
		}
		out := make([]server.LiveNode, len(ns))
		for i, n := range ns {
			out[i] = server.LiveNode{ID: n.ID, Zone: n.Zone, JournalAddr: n.JournalAddr}
		}
		return out, nil
	}
}

// openCoord opens the coordination store named by u; an https:// one is called with the
// cluster identity id when there is one (mutual TLS).
func openCoord(ctx context.Context, u string, id *tlsconf.Source) (coord.Store, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("--coord %q: %w", u, err)
	}
	switch pu.Scheme {
	case "dynamodb":
		q := pu.Query()
		return coord.NewDynamo(ctx, coord.DynamoConfig{Table: pu.Host, Endpoint: q.Get("endpoint"), Region: q.Get("region")})
	case "bolt":
		return coord.NewBolt(pu.Path)
	case "http":
		return coord.NewHTTP(u), nil
	case "https":
		if id == nil {
			return coord.NewHTTP(u), nil
		}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: id.ClientConfig()}}
		return coord.NewHTTPClient(u, hc), nil
	}
	return nil, fmt.Errorf("--coord %q: want dynamodb://TABLE, bolt:///PATH or http://HOST:PORT (a coordination store served by loam dev)", u)
}

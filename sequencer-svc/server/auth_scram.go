package server

import (
	"context"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// LookupKeyByID finds an API key by its id (a SCRAM login names the key by id).
func (n *Node) LookupKeyByID(ctx context.Context, id string) (meta.APIKey, error) {
	if err := ctxErr(ctx); err != nil {
		return meta.APIKey{}, err
	}
	return n.fsm.LookupKeyByID(id)
}

// LookupKeyByID finds an API key by its id, on the leader.
func (c localClient) LookupKeyByID(ctx context.Context, id string) (meta.APIKey, error) {
	if c.n.leaderReady() {
		return c.n.LookupKeyByID(ctx, id)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.LookupKeyRequest{Id: id}, c.auth().lookupKey, remoteLookupKey)
	if err != nil {
		return meta.APIKey{}, err
	}
	return metapb.ToAPIKey(r.GetKey()), nil
}

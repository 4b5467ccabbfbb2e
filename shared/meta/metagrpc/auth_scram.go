package metagrpc

import (
	"context"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// LookupKeyByID finds an API key by its id (a SCRAM login names the key by id).
func (c *client) LookupKeyByID(ctx context.Context, id string) (meta.APIKey, error) {
	var out meta.APIKey
	err := c.auth(ctx, func(ctx context.Context, s metapb.AuthClient) error {
		r, err := s.LookupKey(ctx, &metapb.LookupKeyRequest{Id: id})
		out = metapb.ToAPIKey(r.GetKey())
		return err
	})
	return out, err
}

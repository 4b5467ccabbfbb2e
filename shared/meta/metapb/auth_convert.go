package metapb

import "github.com/loamhq/loam/shared/meta"

// FromAPIKey converts an API key (its hash included) to its wire form.
func FromAPIKey(k meta.APIKey) *ApiKey {
	return &ApiKey{Id: k.ID, Namespace: k.Namespace, Admin: k.Admin, Hash: k.Hash, CreatedMs: k.CreatedMs,
		RevokedMs: k.RevokedMs, Description: k.Description}
}

// ToAPIKey converts the wire form of an API key.
func ToAPIKey(k *ApiKey) meta.APIKey {
	return meta.APIKey{ID: k.GetId(), Namespace: k.GetNamespace(), Admin: k.GetAdmin(), Hash: k.GetHash(),
		CreatedMs: k.GetCreatedMs(), RevokedMs: k.GetRevokedMs(), Description: k.GetDescription()}
}

package metapb

import "github.com/loamhq/loam/shared/meta"

// FromAPIKey converts an API key (its hash included) to its wire form.
func FromAPIKey(k meta.APIKey) *ApiKey {
	out := &ApiKey{Id: k.ID, Namespace: k.Namespace, Admin: k.Admin, Hash: k.Hash, CreatedMs: k.CreatedMs,
		RevokedMs: k.RevokedMs, Description: k.Description}
	for _, v := range k.SCRAM {
		out.Scram = append(out.Scram, &ScramVerifier{Mechanism: v.Mechanism, Salt: v.Salt, Iterations: v.Iterations,
			StoredKey: v.StoredKey, ServerKey: v.ServerKey})
	}
	return out
}

// ToAPIKey converts the wire form of an API key.
func ToAPIKey(k *ApiKey) meta.APIKey {
	out := meta.APIKey{ID: k.GetId(), Namespace: k.GetNamespace(), Admin: k.GetAdmin(), Hash: k.GetHash(),
		CreatedMs: k.GetCreatedMs(), RevokedMs: k.GetRevokedMs(), Description: k.GetDescription()}
	for _, v := range k.GetScram() {
		out.SCRAM = append(out.SCRAM, meta.SCRAMVerifier{Mechanism: v.GetMechanism(), Salt: v.GetSalt(),
			Iterations: v.GetIterations(), StoredKey: v.GetStoredKey(), ServerKey: v.GetServerKey()})
	}
	return out
}

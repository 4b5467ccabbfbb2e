package metapb

import "github.com/loamhq/loam/shared/meta"

// FromNamespaceKey converts a meta.NamespaceKey.
func FromNamespaceKey(k meta.NamespaceKey) *NamespaceKey {
	return &NamespaceKey{Namespace: k.Namespace, Id: k.ID, KeyArn: k.KeyARN, Generation: k.Generation, State: k.State,
		UpdatedMs: k.UpdatedMs, ShreddedMs: k.ShreddedMs, Dropped: k.Dropped}
}

// ToNamespaceKey converts a NamespaceKey (nil: the zero key).
func ToNamespaceKey(k *NamespaceKey) meta.NamespaceKey {
	return meta.NamespaceKey{Namespace: k.GetNamespace(), ID: k.GetId(), KeyARN: k.GetKeyArn(), Generation: k.GetGeneration(),
		State: k.GetState(), UpdatedMs: k.GetUpdatedMs(), ShreddedMs: k.GetShreddedMs(), Dropped: k.GetDropped()}
}

package fsm

import (
	"bytes"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// API keys and namespace deletion.
//
// Two buckets, created by the first key command (a database without them has no keys, so
// the state format stays v4 and older databases need no migration):
//
//	api_keys       key id           -> metapb.ApiKey (the key's SHA-256, scope, times)
//	api_key_hashes SHA-256 of a key -> key id
//
// A key is never stored in clear: only its hash, which is what LookupKey finds it by.
// Revoking a key keeps its record (RevokedMs set), so a revoked key is answered as revoked
// rather than unknown and its id is never reused. The number of keys is bounded by
// meta.MaxKeys (counted in the meta bucket's api_keys value).
var (
	bKeys      = []byte("api_keys")
	bKeyHashes = []byte("api_key_hashes")
	kKeyCount  = []byte("api_keys") // in the meta bucket: how many keys api_keys holds
)

// CreateKey is the command that stores API key k (its CreatedMs is the command's stamp).
func CreateKey(k meta.APIKey) *metapb.Command {
	k.CreatedMs, k.RevokedMs = 0, 0
	return authCommand(&metapb.AuthCmd{Op: &metapb.AuthCmd_CreateKey{CreateKey: metapb.FromAPIKey(k)}})
}

// RevokeKey is the command that revokes API key id.
func RevokeKey(id string) *metapb.Command {
	return authCommand(&metapb.AuthCmd{Op: &metapb.AuthCmd_RevokeKey{RevokeKey: &metapb.RevokeKeyCmd{Id: id}}})
}

// DeleteNamespace is the command that deletes an empty namespace and revokes its keys.
func DeleteNamespace(name string) *metapb.Command {
	return authCommand(&metapb.AuthCmd{Op: &metapb.AuthCmd_DeleteNamespace{DeleteNamespace: &metapb.DeleteNamespaceCmd{Name: name}}})
}

func authCommand(c *metapb.AuthCmd) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_Auth{Auth: c}}
}

// applyAuth applies one namespace or key command.
func (a *applier) applyAuth(c *metapb.AuthCmd, res *Result) {
	switch op := c.GetOp().(type) {
	case *metapb.AuthCmd_CreateKey:
		res.Key, res.Err = a.createKey(metapb.ToAPIKey(op.CreateKey))
	case *metapb.AuthCmd_RevokeKey:
		res.Err = a.revokeKey(op.RevokeKey.GetId())
	case *metapb.AuthCmd_DeleteNamespace:
		res.Err = a.deleteNamespace(op.DeleteNamespace.GetName())
	default:
		res.Err = fmt.Errorf("%w: unknown auth operation", ErrBadCommand)
	}
}

func (a *applier) keyBuckets() (keys, hashes *bolt.Bucket) {
	keys, err := a.tx.CreateBucketIfNotExists(bKeys)
	a.check(err)
	hashes, err = a.tx.CreateBucketIfNotExists(bKeyHashes)
	a.check(err)
	return keys, hashes
}

func (a *applier) createKey(k meta.APIKey) (meta.APIKey, error) {
	if err := meta.CheckKey(k); err != nil {
		return meta.APIKey{}, fmt.Errorf("create key: %w", err)
	}
	if !k.Admin && !a.nsExists(k.Namespace) {
		return meta.APIKey{}, fmt.Errorf("create key %s: namespace %s: %w", k.ID, k.Namespace, meta.ErrNamespaceNotFound)
	}
	keys, hashes := a.keyBuckets()
	if keys == nil || hashes == nil {
		return meta.APIKey{}, fmt.Errorf("create key %s: %w", k.ID, meta.ErrUnavailable)
	}
	if v := keys.Get([]byte(k.ID)); v != nil {
		old, err := decodeKey(v)
		if err != nil {
			return meta.APIKey{}, err
		}
		if bytes.Equal(old.Hash, k.Hash) && old.Admin == k.Admin && old.Namespace == k.Namespace && !old.Revoked() {
			return old, nil // a retry of the same creation
		}
		return meta.APIKey{}, fmt.Errorf("create key %s: %w", k.ID, meta.ErrKeyExists)
	}
	if hashes.Get(k.Hash) != nil {
		return meta.APIKey{}, fmt.Errorf("create key %s: a key of the same secret exists: %w", k.ID, meta.ErrKeyExists)
	}
	m := a.tx.Bucket(bMeta)
	if n := getU64(m, kKeyCount); n >= meta.MaxKeys {
		return meta.APIKey{}, fmt.Errorf("create key %s: %w: the metastore holds %d keys (at most %d, revoked ones included)",
			k.ID, meta.ErrInvalidArgument, n, meta.MaxKeys)
	}
	k.CreatedMs, k.RevokedMs = a.clock, 0
	a.putKey(keys, k)
	a.check(hashes.Put(k.Hash, []byte(k.ID)))
	a.check(putU64(m, kKeyCount, getU64(m, kKeyCount)+1))
	return k, nil
}

func (a *applier) putKey(keys *bolt.Bucket, k meta.APIKey) {
	v, err := proto.Marshal(metapb.FromAPIKey(k))
	a.check(err)
	a.check(keys.Put([]byte(k.ID), v))
}

func (a *applier) revokeKey(id string) error {
	keys := a.tx.Bucket(bKeys)
	var v []byte
	if keys != nil {
		v = keys.Get([]byte(id))
	}
	if v == nil {
		return fmt.Errorf("revoke key %q: %w", id, meta.ErrKeyNotFound)
	}
	k, err := decodeKey(v)
	if err != nil {
		return err
	}
	if k.Revoked() {
		return nil
	}
	k.RevokedMs = max(a.clock, 1)
	a.putKey(keys, k)
	return nil
}

func (a *applier) deleteNamespace(name string) error {
	if name == meta.DefaultNS {
		return fmt.Errorf("delete namespace %s: %w: the default namespace cannot be deleted", name, meta.ErrInvalidArgument)
	}
	if !a.nsExists(name) {
		return fmt.Errorf("delete namespace %s: %w", name, meta.ErrNamespaceNotFound)
	}
	prefix := streamKey(name, "")
	if k, _ := a.tx.Bucket(bStreams).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
		return fmt.Errorf("delete namespace %s: %w: delete its streams first", name, meta.ErrNamespaceNotEmpty)
	}
	a.check(a.tx.Bucket(bNS).Delete([]byte(name)))
	a.dropNamespaceKey(name) // nskeys_delete.go
	// Its keys are revoked, so a namespace created again under the name starts with none.
	if keys := a.tx.Bucket(bKeys); keys != nil {
		var revoke []meta.APIKey
		err := keys.ForEach(func(_, v []byte) error {
			k, err := decodeKey(v)
			if err == nil && k.Namespace == name && !k.Revoked() {
				revoke = append(revoke, k)
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, k := range revoke {
			k.RevokedMs = max(a.clock, 1)
			a.putKey(keys, k)
		}
	}
	return nil
}

func decodeKey(v []byte) (meta.APIKey, error) {
	var k metapb.ApiKey
	if err := proto.Unmarshal(v, &k); err != nil {
		return meta.APIKey{}, fmt.Errorf("%w: api key record: %w", ErrCorrupt, err)
	}
	return metapb.ToAPIKey(&k), nil
}

// ---- reads ----

// LookupKey answers the key whose hash is hash, revoked or not, or meta.ErrKeyNotFound.
func (f *FSM) LookupKey(hash []byte) (meta.APIKey, error) {
	var out meta.APIKey
	err := f.view(func(tx *bolt.Tx) error {
		keys, hashes := tx.Bucket(bKeys), tx.Bucket(bKeyHashes)
		var id []byte
		if hashes != nil && len(hash) > 0 {
			id = hashes.Get(hash)
		}
		if id == nil || keys == nil {
			return fmt.Errorf("lookup key: %w", meta.ErrKeyNotFound)
		}
		v := keys.Get(id)
		if v == nil {
			return fmt.Errorf("%w: key hash names id %q without a record", ErrCorrupt, id)
		}
		var err error
		out, err = decodeKey(v)
		return err
	})
	return out, err
}

// ListKeys lists every key by id, hashes left out.
func (f *FSM) ListKeys() ([]meta.APIKey, error) {
	var out []meta.APIKey
	err := f.view(func(tx *bolt.Tx) error {
		keys := tx.Bucket(bKeys)
		if keys == nil {
			return nil
		}
		return keys.ForEach(func(_, v []byte) error {
			k, err := decodeKey(v)
			if err != nil {
				return err
			}
			k.Hash = nil
			out = append(out, k)
			return nil
		})
	})
	return out, err
}

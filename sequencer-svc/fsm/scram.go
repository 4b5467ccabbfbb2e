package fsm

import (
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	bolt "go.etcd.io/bbolt"
)

// A key's SCRAM verifiers live in its api_keys record (metapb.ApiKey.scram), made by the
// log node that created the key: the state machine stores them as given and never sees
// the key. A SCRAM login names the key by id, so a key is also looked up by id.

// LookupKeyByID answers key id, revoked or not, or meta.ErrKeyNotFound.
func (f *FSM) LookupKeyByID(id string) (meta.APIKey, error) {
	var out meta.APIKey
	err := f.view(func(tx *bolt.Tx) error {
		keys := tx.Bucket(bKeys)
		var v []byte
		if keys != nil && id != "" {
			v = keys.Get([]byte(id))
		}
		if v == nil {
			return fmt.Errorf("lookup key %q: %w", id, meta.ErrKeyNotFound)
		}
		var err error
		out, err = decodeKey(v)
		return err
	})
	return out, err
}

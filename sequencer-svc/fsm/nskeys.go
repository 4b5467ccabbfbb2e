package fsm

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Namespace keys (meta.NamespaceKey). The bucket "nskeys" maps a namespace name to its
// NamespaceKey message (protobuf, deterministic encoding); the key "\x00next" holds the
// next namespace key id, 8 bytes big-endian (names never start with a zero byte). The
// bucket is created by the first attach, so databases without it read as "no keys" and the
// format is unchanged. Bound: one key per namespace, each at most MaxKeyARNLength plus
// MaxShredAcks node ids.
var (
	bNSKeys  = []byte("nskeys")
	kNSKeyID = []byte("\x00next")
)

// AttachNamespaceKey is the command that attaches a KMS key to a namespace.
func AttachNamespaceKey(ns, keyARN string) *metapb.Command {
	return nsKeyCmd(&metapb.NamespaceKeyCmd{Op: &metapb.NamespaceKeyCmd_Attach{Attach: &metapb.AttachNamespaceKeyRequest{Namespace: ns, KeyArn: keyARN}}})
}

// RotateNamespaceKey is the command that starts a namespace key's next generation.
func RotateNamespaceKey(ns, keyARN string) *metapb.Command {
	return nsKeyCmd(&metapb.NamespaceKeyCmd{Op: &metapb.NamespaceKeyCmd_Rotate{Rotate: &metapb.RotateNamespaceKeyRequest{Namespace: ns, KeyArn: keyARN}}})
}

// ShredNamespaceKey is the command that records a namespace key's shredding.
func ShredNamespaceKey(ns string) *metapb.Command {
	return nsKeyCmd(&metapb.NamespaceKeyCmd{Op: &metapb.NamespaceKeyCmd_Shred{Shred: &metapb.ShredNamespaceKeyRequest{Namespace: ns}}})
}

// AckNamespaceShred is the command that records a log node's confirmation of a shred.
func AckNamespaceShred(ns, node string) *metapb.Command {
	return nsKeyCmd(&metapb.NamespaceKeyCmd{Op: &metapb.NamespaceKeyCmd_AckShred{AckShred: &metapb.AckNamespaceShredRequest{Namespace: ns, Node: node}}})
}

func nsKeyCmd(c *metapb.NamespaceKeyCmd) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_NamespaceKey{NamespaceKey: c}}
}

// applyNamespaceKey applies a namespace key command.
func (a *applier) applyNamespaceKey(c *metapb.NamespaceKeyCmd) (meta.NamespaceKey, error) {
	switch op := c.GetOp().(type) {
	case *metapb.NamespaceKeyCmd_Attach:
		return a.attachNamespaceKey(op.Attach.GetNamespace(), op.Attach.GetKeyArn())
	case *metapb.NamespaceKeyCmd_Rotate:
		return a.changeNamespaceKey(op.Rotate.GetNamespace(), "rotate", func(k *meta.NamespaceKey) error {
			if op.Rotate.GetKeyArn() != "" {
				if err := meta.CheckKeyARN(op.Rotate.GetKeyArn()); err != nil {
					return err
				}
				k.KeyARN = op.Rotate.GetKeyArn()
			}
			k.Generation++
			return nil
		})
	case *metapb.NamespaceKeyCmd_Shred:
		return a.changeNamespaceKey(op.Shred.GetNamespace(), "shred", func(k *meta.NamespaceKey) error {
			k.State, k.ShreddedMs = meta.NamespaceKeyShredded, a.clock
			return nil
		})
	case *metapb.NamespaceKeyCmd_AckShred:
		node := op.AckShred.GetNode()
		return a.changeNamespaceKey(op.AckShred.GetNamespace(), "confirm the shred", func(k *meta.NamespaceKey) error {
			i, found := slices.BinarySearch(k.Dropped, node)
			switch {
			case node == "":
				return fmt.Errorf("%w: confirm the shred of namespace %s: empty node id", meta.ErrInvalidArgument, k.Namespace)
			case found:
				return nil
			case len(k.Dropped) >= meta.MaxShredAcks:
				return fmt.Errorf("%w: confirm the shred of namespace %s: %d nodes confirmed already", meta.ErrInvalidArgument, k.Namespace, len(k.Dropped))
			}
			k.Dropped = slices.Insert(k.Dropped, i, node)
			return nil
		})
	}
	return meta.NamespaceKey{}, fmt.Errorf("%w: unknown namespace key operation", ErrBadCommand)
}

func (a *applier) attachNamespaceKey(ns, arn string) (meta.NamespaceKey, error) {
	if err := meta.CheckKeyARN(arn); err != nil {
		return meta.NamespaceKey{}, fmt.Errorf("attach a key to namespace %s: %w", ns, err)
	}
	if !a.nsExists(ns) {
		return meta.NamespaceKey{}, fmt.Errorf("attach a key to namespace %s: %w", ns, meta.ErrNamespaceNotFound)
	}
	b, err := a.tx.CreateBucketIfNotExists(bNSKeys)
	if err != nil {
		a.check(err)
		return meta.NamespaceKey{}, err
	}
	if k, ok := getNamespaceKey(b, ns); ok {
		switch {
		case k.Shredded():
			return meta.NamespaceKey{}, fmt.Errorf("%w: namespace %s: its key was shredded; create a new namespace", meta.ErrInvalidArgument, ns)
		case k.KeyARN != arn:
			return meta.NamespaceKey{}, fmt.Errorf("%w: namespace %s already has a key (%s); rotate it to move to another", meta.ErrInvalidArgument, ns, k.KeyARN)
		}
		return k, nil // a retry
	}
	id := getU64(b, kNSKeyID) + 1
	a.check(putU64(b, kNSKeyID, id))
	k := meta.NamespaceKey{Namespace: ns, ID: id, KeyARN: arn, Generation: 1, State: meta.NamespaceKeyActive, UpdatedMs: a.clock}
	a.check(putNamespaceKey(b, k))
	return k, nil
}

// changeNamespaceKey applies fn to ns's key and stores it, unless fn refuses. A shredded
// key changes only by confirmations (and a repeated shred, which changes nothing).
func (a *applier) changeNamespaceKey(ns, what string, fn func(*meta.NamespaceKey) error) (meta.NamespaceKey, error) {
	b := a.tx.Bucket(bNSKeys)
	var k meta.NamespaceKey
	ok := false
	if b != nil {
		k, ok = getNamespaceKey(b, ns)
	}
	if !ok {
		if !a.nsExists(ns) {
			return meta.NamespaceKey{}, fmt.Errorf("%s the key of namespace %s: %w", what, ns, meta.ErrNamespaceNotFound)
		}
		return meta.NamespaceKey{}, fmt.Errorf("%w: %s the key of namespace %s: the namespace has no key", meta.ErrInvalidArgument, what, ns)
	}
	if k.Shredded() {
		switch what {
		case "shred":
			return k, nil
		case "rotate":
			return meta.NamespaceKey{}, fmt.Errorf("%w: rotate the key of namespace %s: it was shredded", meta.ErrInvalidArgument, ns)
		}
	} else if what == "confirm the shred" {
		return meta.NamespaceKey{}, fmt.Errorf("%w: confirm the shred of namespace %s: its key is not shredded", meta.ErrInvalidArgument, ns)
	}
	before := len(k.Dropped)
	gen := k.Generation
	if err := fn(&k); err != nil {
		return meta.NamespaceKey{}, err
	}
	if what == "confirm the shred" && len(k.Dropped) == before && k.Generation == gen {
		return k, nil // repeated: nothing to store
	}
	k.UpdatedMs = a.clock
	a.check(putNamespaceKey(b, k))
	return k, nil
}

func getNamespaceKey(b *bolt.Bucket, ns string) (meta.NamespaceKey, bool) {
	v := b.Get([]byte(ns))
	if v == nil {
		return meta.NamespaceKey{}, false
	}
	var m metapb.NamespaceKey
	if err := proto.Unmarshal(v, &m); err != nil {
		panic(fmt.Sprintf("fsm: namespace key of %s: %v", ns, err)) // the state is corrupt
	}
	return metapb.ToNamespaceKey(&m), true
}

func putNamespaceKey(b *bolt.Bucket, k meta.NamespaceKey) error {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(metapb.FromNamespaceKey(k))
	if err != nil {
		return err
	}
	return b.Put([]byte(k.Namespace), v)
}

// ListNamespaceKeys lists every namespace key by namespace name.
func (f *FSM) ListNamespaceKeys() ([]meta.NamespaceKey, error) {
	var out []meta.NamespaceKey
	err := f.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bNSKeys)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			if len(k) > 0 && k[0] != 0 {
				nk, _ := getNamespaceKey(b, string(k))
				out = append(out, nk)
			}
			return nil
		})
	})
	return out, err
}

package envelope

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/objstore"
)

// ErrKeyUnavailable is returned when a namespace's key cannot be used: disabled, scheduled
// for deletion or deleted (crypto-shredded), or refused to this caller. Only that
// namespace's chunks fail with it.
var ErrKeyUnavailable = errors.New("envelope: key unavailable")

// KMS is the part of the AWS KMS API a Keyring calls (*kms.Client has it).
type KMS interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Namespace is a namespace with a customer-managed key.
type Namespace struct {
	ID     uint64 // names its key objects: ns/<ID>/keys/
	Name   string
	KeyARN string // the KMS key (ARN, id or alias)
}

// KeyConfig configures a Keyring.
type KeyConfig struct {
	KMS    KMS
	Bucket objstore.Bucket // where wrapped key-encryption keys are stored
	// Rotate is how long a namespace's key-encryption key seals new chunks before the next
	// is generated (default 1 h): one GenerateDataKey per namespace, node and period.
	Rotate time.Duration
	// MaxKeys bounds the key-encryption keys held for opening (LRU; default 4096, 32 bytes
	// each plus their ids).
	MaxKeys int
	Now     func() time.Time
}

// Keyring seals and opens chunks with namespaces' key-encryption keys. Key material lives
// only in its memory; Forget drops a namespace's.
type Keyring struct {
	cfg     KeyConfig
	genMu   sync.Mutex // held while a sealing key is generated
	mu      sync.Mutex
	current map[uint64]*kek // sealing key per namespace
	keys    map[string]*kek // opening keys by id (LRU by used)
	clock   uint64
}

type kek struct {
	ns      uint64
	id      string
	key     []byte
	created time.Time
	used    uint64
}

// storedKey is the object at ns/<id>/keys/<key id>.key: KMS's wrapped copy, never the key.
type storedKey struct {
	KeyARN     string    `json:"key_arn"`
	Namespace  string    `json:"namespace"`
	Ciphertext []byte    `json:"ciphertext_blob"`
	Created    time.Time `json:"created"`
}

// NewKeyring checks cfg.
func NewKeyring(cfg KeyConfig) (*Keyring, error) {
	if cfg.KMS == nil || cfg.Bucket == nil {
		return nil, errors.New("envelope: KMS and Bucket are required")
	}
	if cfg.Rotate <= 0 {
		cfg.Rotate = time.Hour
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Keyring{cfg: cfg, current: map[uint64]*kek{}, keys: map[string]*kek{}}, nil
}

// KeyObject is where the wrapped key-encryption key id of namespace ns is stored.
func KeyObject(ns uint64, id string) string {
	return "ns/" + strconv.FormatUint(ns, 10) + "/keys/" + id + ".key"
}

// encryptionContext binds a wrapped key to its namespace and id: KMS refuses to decrypt it
// under any other.
func encryptionContext(ns Namespace, id string) map[string]string {
	return map[string]string{"loam:namespace": ns.Name, "loam:namespace-id": strconv.FormatUint(ns.ID, 10), "loam:key-id": id}
}

// Seal seals a chunk of ns.
func (k *Keyring) Seal(ctx context.Context, ns Namespace, id ChunkID, plaintext []byte) ([]byte, error) {
	key, err := k.sealingKey(ctx, ns)
	if err != nil {
		return nil, err
	}
	return Seal(key.key, key.id, id, plaintext)
}

// Open opens a sealed chunk of ns: ErrKeyUnavailable when its key cannot be had,
// ErrSealed when it does not open.
func (k *Keyring) Open(ctx context.Context, ns Namespace, id ChunkID, sealed []byte) ([]byte, error) {
	keyID, err := KeyID(sealed)
	if err != nil {
		return nil, err
	}
	key, err := k.openingKey(ctx, ns, keyID)
	if err != nil {
		return nil, err
	}
	return Open(key.key, id, sealed)
}

// Forget drops every key of namespace ns from memory (crypto-shredding: the next use asks
// KMS again, which refuses once the key is disabled or deleted).
func (k *Keyring) Forget(ns uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.current[ns]; c != nil {
		clear(c.key)
		delete(k.current, ns)
	}
	for id, c := range k.keys {
		if c.ns == ns {
			clear(c.key)
			delete(k.keys, id)
		}
	}
}

// Rotate makes the next chunk of namespace ns sealed under a new key-encryption key
// (a rotation); the current one stays for opening the chunks it sealed.
func (k *Keyring) Rotate(ns uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.current, ns)
}

func (k *Keyring) sealingKey(ctx context.Context, ns Namespace) (*kek, error) {
	now := k.cfg.Now()
	k.mu.Lock()
	if c := k.current[ns.ID]; c != nil && now.Sub(c.created) < k.cfg.Rotate {
		k.mu.Unlock()
		return c, nil
	}
	k.mu.Unlock()
	// One generation at a time, so concurrent seals of a namespace whose key is due make
	// one GenerateDataKey.
	k.genMu.Lock()
	defer k.genMu.Unlock()
	k.mu.Lock()
	if c := k.current[ns.ID]; c != nil && now.Sub(c.created) < k.cfg.Rotate {
		k.mu.Unlock()
		return c, nil
	}
	k.mu.Unlock()
	// A new key-encryption key: KMS makes it, its wrapped copy is stored before any chunk
	// sealed with it can be written.
	id := ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()
	out, err := k.cfg.KMS.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(ns.KeyARN),
		KeySpec: kmstypes.DataKeySpecAes256, EncryptionContext: encryptionContext(ns, id)})
	if err != nil {
		return nil, kmsError(ns, "generate a data key", err)
	}
	body, err := json.Marshal(storedKey{KeyARN: ns.KeyARN, Namespace: ns.Name, Ciphertext: out.CiphertextBlob, Created: now.UTC()})
	if err != nil {
		return nil, err
	}
	if err := k.cfg.Bucket.Put(ctx, KeyObject(ns.ID, id), body, objstore.IfAbsent()); err != nil {
		clear(out.Plaintext)
		return nil, fmt.Errorf("envelope: namespace %s: store its wrapped key: %w", ns.Name, err)
	}
	if len(out.Plaintext) != keySize {
		return nil, fmt.Errorf("envelope: namespace %s: KMS answered a %d-byte data key", ns.Name, len(out.Plaintext))
	}
	c := &kek{ns: ns.ID, id: id, key: out.Plaintext, created: now}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.current[ns.ID] = c
	k.remember(c)
	return c, nil
}

func (k *Keyring) openingKey(ctx context.Context, ns Namespace, id string) (*kek, error) {
	k.mu.Lock()
	if c := k.keys[id]; c != nil && c.ns == ns.ID {
		k.clock++
		c.used = k.clock
		k.mu.Unlock()
		return c, nil
	}
	k.mu.Unlock()
	body, err := k.cfg.Bucket.Get(ctx, KeyObject(ns.ID, id))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: namespace %s: key %s is not stored under ns/%d/keys/", ErrKeyUnavailable, ns.Name, id, ns.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("envelope: namespace %s: read key %s: %w", ns.Name, id, err)
	}
	var sk storedKey
	if err := json.Unmarshal(body, &sk); err != nil || len(sk.Ciphertext) == 0 {
		return nil, fmt.Errorf("%w: namespace %s: key object %s is malformed", ErrKeyUnavailable, ns.Name, id)
	}
	out, err := k.cfg.KMS.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: sk.Ciphertext, KeyId: aws.String(sk.KeyARN),
		EncryptionContext: encryptionContext(ns, id)})
	if err != nil {
		return nil, kmsError(ns, "decrypt its data key "+id, err)
	}
	if len(out.Plaintext) != keySize {
		return nil, fmt.Errorf("%w: namespace %s: key %s decrypts to %d bytes", ErrKeyUnavailable, ns.Name, id, len(out.Plaintext))
	}
	c := &kek{ns: ns.ID, id: id, key: out.Plaintext, created: sk.Created}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.remember(c)
	return c, nil
}

// remember caches c for opening, evicting the least recently used beyond MaxKeys. k.mu held.
func (k *Keyring) remember(c *kek) {
	k.clock++
	c.used = k.clock
	k.keys[c.id] = c
	for len(k.keys) > k.cfg.MaxKeys {
		var old *kek
		for _, x := range k.keys {
			if old == nil || x.used < old.used {
				old = x
			}
		}
		if k.current[old.ns] == old {
			delete(k.current, old.ns)
		}
		clear(old.key)
		delete(k.keys, old.id)
	}
}

// kmsError classifies a KMS failure: a key that is disabled, pending deletion, missing or
// refused is ErrKeyUnavailable (naming the namespace, never key material); anything else is
// a transient error.
func kmsError(ns Namespace, what string, err error) error {
	var (
		disabled *kmstypes.DisabledException
		notFound *kmstypes.NotFoundException
		invalid  *kmstypes.KMSInvalidStateException
		badCT    *kmstypes.InvalidCiphertextException
		denied   *kmstypes.IncorrectKeyException
	)
	switch {
	case errors.As(err, &disabled), errors.As(err, &notFound), errors.As(err, &invalid), errors.As(err, &badCT), errors.As(err, &denied):
		return fmt.Errorf("%w: namespace %s: KMS refused to %s: %v", ErrKeyUnavailable, ns.Name, what, err)
	}
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) && (api.ErrorCode() == "AccessDeniedException" || api.ErrorCode() == "DisabledException") {
		return fmt.Errorf("%w: namespace %s: KMS refused to %s: %v", ErrKeyUnavailable, ns.Name, what, err)
	}
	return fmt.Errorf("envelope: namespace %s: KMS: %s: %w", ns.Name, what, err)
}

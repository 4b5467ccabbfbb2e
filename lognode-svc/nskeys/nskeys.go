// Package nskeys administers namespaces' customer-managed KMS keys (docs/encryption.md) for
// the log node's APIs: the HTTP routes (lognode-svc/httpapi/nskeys.go) and the gRPC
// NamespaceKeyService (lognode-svc/grpcapi/nskeys_service.go) both call an Admin, so they
// check, act and refuse alike; each maps an *Error to its own answer.
//
// Shred is the crypto-shredding procedure: it disables the KMS key and schedules its
// deletion (through this node's KMS), records the shred in the metastore, and answers once
// every live log node (the node registry; this node alone without one) has confirmed that
// it dropped the namespace's key material and cached plaintext. Nodes learn of the shred
// from the metastore, which each lists every second (envelope.Catalog), and confirm it
// there. Past its wait it answers an *Error of kind ShredPending naming the nodes still
// waited for; the shred stands, and repeating it waits again.
package nskeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// Shred bounds.
const (
	// DefaultPendingDays is the KMS key's deletion waiting period when none is given.
	DefaultPendingDays = 7
	// DefaultShredWait is how long a shred waits for the live nodes when no wait is given.
	DefaultShredWait = time.Minute
	// MaxShredWait is the longest wait a shred may ask for.
	MaxShredWait = 10 * time.Minute
	shredPoll    = 100 * time.Millisecond
)

// Kind is what an *Error refuses.
type Kind int

const (
	// Invalid is a bad request (HTTP 400, gRPC INVALID_ARGUMENT).
	Invalid Kind = iota + 1
	// NoKey: the namespace has no key (HTTP 404 not_found, gRPC NOT_FOUND).
	NoKey
	// NoKMS: the call needs KMS and this log node has none (HTTP 400 invalid_argument,
	// gRPC FAILED_PRECONDITION kms_not_configured).
	NoKMS
	// ShredPending: the shred is recorded but live log nodes have not confirmed it within
	// the wait (HTTP 504 shred_pending, gRPC DEADLINE_EXCEEDED shred_pending).
	ShredPending
)

// Error is a refusal of an Admin call; its message says what is wrong.
type Error struct {
	Kind Kind
	Msg  string
	// Waiting lists the live log nodes that had not confirmed a ShredPending shred, sorted.
	Waiting []string
}

func (e *Error) Error() string { return e.Msg }

func refuse(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Config configures an Admin.
type Config struct {
	NodeID string
	Meta   meta.Client
	// Keys is the node's namespace key catalog, refreshed at once after a key change (nil:
	// none).
	Keys *envelope.Catalog
	// KMSAdmin creates and shreds KMS keys (nil: this node has no KMS; create and shred
	// are refused).
	KMSAdmin envelope.Admin
	// Nodes lists the live log nodes of a zone, all of them for "" (nil: this node alone).
	Nodes  func(ctx context.Context, zone string) ([]streamapi.Node, error)
	Logger *slog.Logger
}

// Admin administers namespace keys. It holds no state of its own: every call reads the
// metastore.
type Admin struct{ cfg Config }

// New returns an Admin.
func New(cfg Config) *Admin {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Admin{cfg: cfg}
}

// ToAPI is k as the APIs answer it.
func ToAPI(k meta.NamespaceKey) streamapi.NamespaceKey {
	return streamapi.NamespaceKey{Namespace: k.Namespace, ID: k.ID, KMSKey: k.KeyARN, Generation: k.Generation, State: k.State,
		UpdatedMs: k.UpdatedMs, ShreddedMs: k.ShreddedMs, Dropped: k.Dropped}
}

// Get answers ns's key: an *Error of kind NoKey when it has none.
func (a *Admin) Get(ctx context.Context, ns string) (meta.NamespaceKey, error) {
	ks, err := a.cfg.Meta.ListNamespaceKeys(ctx)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	if i := slices.IndexFunc(ks, func(k meta.NamespaceKey) bool { return k.Namespace == ns }); i >= 0 {
		return ks[i], nil
	}
	return meta.NamespaceKey{}, refuse(NoKey, "namespace %s has no key", ns)
}

// refreshKeys makes this node act on a key change now rather than at its next refresh.
func (a *Admin) refreshKeys(ctx context.Context) {
	if a.cfg.Keys != nil {
		if err := a.cfg.Keys.Refresh(ctx); err != nil {
			a.cfg.Logger.Warn("namespace keys refresh failed", "err", err)
		}
	}
}

// kmsKey is the KMS key a request names, or a new one when it asks to create one.
func (a *Admin) kmsKey(ctx context.Context, ns, arn string, create, required bool) (string, error) {
	switch {
	case create && arn != "":
		return "", refuse(Invalid, `give one of "kms_key" and "create": true, not both`)
	case create:
		if a.cfg.KMSAdmin == nil {
			return "", refuse(NoKMS, "this log node has no KMS configured (--kms-endpoint or AWS): it cannot create a key; name one with \"kms_key\"")
		}
		return envelope.CreateKey(ctx, a.cfg.KMSAdmin, ns)
	case arn == "" && required:
		return "", refuse(Invalid, `"kms_key" (a KMS key ARN, id or alias) or "create": true is required`)
	case arn != "":
		if err := meta.CheckKeyARN(arn); err != nil {
			return "", refuse(Invalid, "%s", err.Error())
		}
	}
	return arn, nil
}

// Attach gives namespace ns the KMS key arn, or a new one when create (exactly one of
// them). A namespace that has a key keeps it: the metastore refuses another ARN (rotate to
// move), and create is refused before a KMS key is made that could not be attached.
func (a *Admin) Attach(ctx context.Context, ns, arn string, create bool) (meta.NamespaceKey, error) {
	names, err := a.cfg.Meta.ListNamespaces(ctx)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	if !slices.Contains(names, ns) {
		return meta.NamespaceKey{}, fmt.Errorf("attach a key to namespace %s: %w", ns, meta.ErrNamespaceNotFound)
	}
	if create {
		if k, err := a.Get(ctx, ns); err == nil {
			return meta.NamespaceKey{}, refuse(Invalid, "namespace %s already has a key (%s, %s); rotate it to move to another", ns, k.KeyARN, k.State)
		}
	}
	arn, err = a.kmsKey(ctx, ns, arn, create, true)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	k, err := a.cfg.Meta.AttachNamespaceKey(ctx, ns, arn)
	if err != nil {
		if create {
			a.dropCreated(ctx, ns, arn, err)
		}
		return meta.NamespaceKey{}, err
	}
	a.refreshKeys(ctx)
	return k, nil
}

// dropCreated disables and schedules the deletion of arn, a KMS key created for ns that the
// metastore definitely refused to attach (err: a concurrent change won), so no unused key
// is left behind. A refusal that may have been applied (the sequencer out of reach, a
// deadline) leaves the key alone: it may be the namespace's key now.
func (a *Admin) dropCreated(ctx context.Context, ns, arn string, err error) {
	if !errors.Is(err, meta.ErrInvalidArgument) && !errors.Is(err, meta.ErrNamespaceNotFound) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := envelope.ShredKey(ctx, a.cfg.KMSAdmin, arn, DefaultPendingDays); err != nil {
		a.cfg.Logger.Warn("a KMS key created for a namespace but not attached is left enabled", "namespace", ns, "kms_key", arn, "err", err)
	}
}

// Rotate starts namespace ns's next key generation: on its KMS key (arn "" and not
// create), on arn, or on a new KMS key (create). A shredded key is refused before a KMS
// key is made that could never be used.
func (a *Admin) Rotate(ctx context.Context, ns, arn string, create bool) (meta.NamespaceKey, error) {
	k, err := a.Get(ctx, ns)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	if create && k.Shredded() {
		return meta.NamespaceKey{}, refuse(Invalid, "rotate the key of namespace %s: it was shredded", ns)
	}
	arn, err = a.kmsKey(ctx, ns, arn, create, false)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	k, err = a.cfg.Meta.RotateNamespaceKey(ctx, ns, arn)
	if err != nil {
		if create {
			a.dropCreated(ctx, ns, arn, err)
		}
		return meta.NamespaceKey{}, err
	}
	a.refreshKeys(ctx)
	return k, nil
}

// Shred crypto-shreds namespace ns (see the package comment): pendingDays is the KMS key's
// deletion waiting period (7-30), waitMs how long to wait for the live nodes (0: the
// default; at most MaxShredWait).
func (a *Admin) Shred(ctx context.Context, ns string, pendingDays int, waitMs int64) (meta.NamespaceKey, error) {
	wait := DefaultShredWait
	switch {
	case pendingDays < 7 || pendingDays > 30:
		return meta.NamespaceKey{}, refuse(Invalid, `"pending_days" %d: KMS waits 7-30 days before deleting a key`, pendingDays)
	case waitMs < 0 || time.Duration(waitMs)*time.Millisecond > MaxShredWait:
		return meta.NamespaceKey{}, refuse(Invalid, `"wait_ms" %d is out of range [0, %d]`, waitMs, MaxShredWait.Milliseconds())
	case waitMs > 0:
		wait = time.Duration(waitMs) * time.Millisecond
	}
	if a.cfg.KMSAdmin == nil {
		return meta.NamespaceKey{}, refuse(NoKMS, "this log node has no KMS configured (--kms-endpoint or AWS): it cannot disable the key")
	}
	k, err := a.Get(ctx, ns)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	if err := envelope.ShredKey(ctx, a.cfg.KMSAdmin, k.KeyARN, pendingDays); err != nil {
		return meta.NamespaceKey{}, err
	}
	if k, err = a.cfg.Meta.ShredNamespaceKey(ctx, ns); err != nil {
		return meta.NamespaceKey{}, err
	}
	a.refreshKeys(ctx)
	deadline := time.Now().Add(wait)
	for {
		waiting, err := a.shredWaiting(ctx, k)
		if err != nil {
			return meta.NamespaceKey{}, err
		}
		if len(waiting) == 0 {
			return k, nil
		}
		if time.Now().After(deadline) {
			e := refuse(ShredPending, "namespace %s: the key is shredded, but live log nodes %v have not yet confirmed dropping its keys and cached plaintext; repeat the shred to wait again", ns, waiting)
			e.Waiting = waiting
			return meta.NamespaceKey{}, e
		}
		select {
		case <-ctx.Done():
			return meta.NamespaceKey{}, ctx.Err()
		case <-time.After(shredPoll):
		}
		if k, err = a.Get(ctx, ns); err != nil {
			return meta.NamespaceKey{}, err
		}
	}
}

// shredWaiting lists the live log nodes that have not confirmed k's shred.
func (a *Admin) shredWaiting(ctx context.Context, k meta.NamespaceKey) ([]string, error) {
	live := []string{a.cfg.NodeID}
	if a.cfg.Nodes != nil {
		nodes, err := a.cfg.Nodes(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("list the live log nodes: %w", err)
		}
		for _, n := range nodes {
			if n.ID != a.cfg.NodeID {
				live = append(live, n.ID)
			}
		}
	}
	var waiting []string
	for _, id := range live {
		if !slices.Contains(k.Dropped, id) {
			waiting = append(waiting, id)
		}
	}
	slices.Sort(waiting)
	return waiting, nil
}

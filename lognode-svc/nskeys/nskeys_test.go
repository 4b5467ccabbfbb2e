package nskeys_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/loamhq/loam/lognode-svc/nskeys"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// fakeKMS counts the key administration calls.
type fakeKMS struct {
	mu                  sync.Mutex
	created, shredCalls int
}

func (f *fakeKMS) CreateKey(ctx context.Context, in *kms.CreateKeyInput, _ ...func(*kms.Options)) (*kms.CreateKeyOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created++
	arn := fmt.Sprintf("arn:aws:kms:us-east-1:111122223333:key/k%d", f.created)
	return &kms.CreateKeyOutput{KeyMetadata: &kmstypes.KeyMetadata{Arn: aws.String(arn)}}, nil
}

func (f *fakeKMS) DisableKey(ctx context.Context, in *kms.DisableKeyInput, _ ...func(*kms.Options)) (*kms.DisableKeyOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shredCalls++
	return &kms.DisableKeyOutput{}, nil
}

func (f *fakeKMS) ScheduleKeyDeletion(ctx context.Context, in *kms.ScheduleKeyDeletionInput, _ ...func(*kms.Options)) (*kms.ScheduleKeyDeletionOutput, error) {
	return &kms.ScheduleKeyDeletionOutput{}, nil
}

func (f *fakeKMS) count() (created, shreds int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created, f.shredCalls
}

func wantKind(t *testing.T, what string, err error, kind nskeys.Kind, sub string) *nskeys.Error {
	t.Helper()
	ke, ok := errors.AsType[*nskeys.Error](err)
	if !ok || ke.Kind != kind || !strings.Contains(ke.Msg, sub) {
		t.Fatalf("%s: %v, want an *nskeys.Error of kind %d saying %q", what, err, kind, sub)
	}
	return ke
}

// TestRotateCreateOfAShreddedKey: rotating a shredded namespace's key onto a new KMS key is
// refused before a KMS key is made that could never be used.
func TestRotateCreateOfAShreddedKey(t *testing.T) {
	ctx := context.Background()
	mc := servertest.Client(t)
	if err := mc.CreateNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	fk := &fakeKMS{}
	a := nskeys.New(nskeys.Config{NodeID: "n-1", Meta: mc, KMSAdmin: fk})
	if _, err := a.Attach(ctx, "team-a", "alias/team-a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.ShredNamespaceKey(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Rotate(ctx, "team-a", "", true)
	if created, _ := fk.count(); created != 0 {
		t.Errorf("%d KMS key(s) created for a shredded namespace's rotation (%v)", created, err)
	}
	wantKind(t, "rotate a shredded key onto a new one", err, nskeys.Invalid, "shredded")
	// Without create, the metastore's own refusal answers.
	if _, err := a.Rotate(ctx, "team-a", "", false); !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), "shredded") {
		t.Fatalf("rotate a shredded key: %v", err)
	}
}

// TestShredWaits: a shred no live node confirms answers ShredPending naming the nodes,
// after recording the shred; the caller's context ending ends the wait; a registry that
// cannot be listed fails it naming that.
func TestShredWaits(t *testing.T) {
	ctx := context.Background()
	mc := servertest.Client(t)
	for _, ns := range []string{"team-a", "team-b"} {
		if err := mc.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	fk := &fakeKMS{}
	nodes := func(ctx context.Context, zone string) ([]streamapi.Node, error) {
		return []streamapi.Node{{ID: "n-2"}, {ID: "n-1"}}, nil
	}
	a := nskeys.New(nskeys.Config{NodeID: "n-1", Meta: mc, KMSAdmin: fk, Nodes: nodes}) // no node confirms
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := a.Attach(ctx, ns, "alias/"+ns, false); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := a.Shred(ctx, "team-a", 7, 200)
	ke := wantKind(t, "shred", err, nskeys.ShredPending, "[n-1 n-2]")
	if strings.Join(ke.Waiting, ",") != "n-1,n-2" || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("waiting %v after %v", ke.Waiting, time.Since(start))
	}
	if k, err := a.Get(ctx, "team-a"); err != nil || k.State != meta.NamespaceKeyShredded {
		t.Fatalf("a pending shred was not recorded: %+v %v", k, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if _, err := a.Shred(cctx, "team-b", 7, 60000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shred past the caller's deadline: %v", err)
	}
	broken := nskeys.New(nskeys.Config{NodeID: "n-1", Meta: mc, KMSAdmin: fk,
		Nodes: func(context.Context, string) ([]streamapi.Node, error) { return nil, errors.New("registry down") }})
	if _, err := broken.Shred(ctx, "team-b", 7, 100); err == nil || !strings.Contains(err.Error(), "list the live log nodes: registry down") {
		t.Fatalf("shred with a broken registry: %v", err)
	}
	_, err = a.Shred(ctx, "team-a", 6, 0)
	wantKind(t, "6 days", err, nskeys.Invalid, `"pending_days" 6`)
	_, err = a.Shred(ctx, "nope", 7, 0)
	wantKind(t, "no key", err, nskeys.NoKey, "namespace nope has no key")
	_, err = nskeys.New(nskeys.Config{NodeID: "n-1", Meta: mc}).Shred(ctx, "team-a", 7, 0)
	wantKind(t, "no KMS", err, nskeys.NoKMS, "no KMS configured")
}

// racingMeta attaches another key to a namespace just before each attach or rotation
// reaches the metastore: a concurrent attach that won.
type racingMeta struct {
	meta.Client
}

func (m racingMeta) AttachNamespaceKey(ctx context.Context, ns, arn string) (meta.NamespaceKey, error) {
	if _, err := m.Client.AttachNamespaceKey(ctx, ns, "alias/winner"); err != nil {
		return meta.NamespaceKey{}, err
	}
	return m.Client.AttachNamespaceKey(ctx, ns, arn)
}

func (m racingMeta) RotateNamespaceKey(ctx context.Context, ns, arn string) (meta.NamespaceKey, error) {
	if _, err := m.Client.ShredNamespaceKey(ctx, ns); err != nil {
		return meta.NamespaceKey{}, err
	}
	return m.Client.RotateNamespaceKey(ctx, ns, arn)
}

// TestCreatedKeyNotAttachedIsShredded: a KMS key created for an attach or a rotation that
// the metastore then refuses (a concurrent change won) is disabled and scheduled for
// deletion, not left behind unused.
func TestCreatedKeyNotAttachedIsShredded(t *testing.T) {
	ctx := context.Background()
	mc := servertest.Client(t)
	for _, ns := range []string{"team-a", "team-b"} {
		if err := mc.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	fk := &fakeKMS{}
	a := nskeys.New(nskeys.Config{NodeID: "n-1", Meta: racingMeta{mc}, KMSAdmin: fk})
	if _, err := a.Attach(ctx, "team-a", "", true); !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), "already has a key") {
		t.Fatalf("attach that lost the race: %v", err)
	}
	if created, shreds := fk.count(); created != 1 || shreds != 1 {
		t.Fatalf("attach that lost the race: %d KMS keys created, %d shredded; want the created one shredded", created, shreds)
	}
	if _, err := mc.AttachNamespaceKey(ctx, "team-b", "alias/team-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Rotate(ctx, "team-b", "", true); !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), "shredded") {
		t.Fatalf("rotation that lost the race: %v", err)
	}
	if created, shreds := fk.count(); created != 2 || shreds != 2 {
		t.Fatalf("rotation that lost the race: %d KMS keys created, %d shredded; want each created one shredded", created, shreds)
	}
}

// unknownMeta's attach may or may not have been applied.
type unknownMeta struct{ meta.Client }

func (m unknownMeta) AttachNamespaceKey(ctx context.Context, ns, arn string) (meta.NamespaceKey, error) {
	if _, err := m.Client.AttachNamespaceKey(ctx, ns, arn); err != nil {
		return meta.NamespaceKey{}, err
	}
	return meta.NamespaceKey{}, fmt.Errorf("attach: %w", meta.ErrUnavailable)
}

// TestCreatedKeyOfAnUnknownAttachIsKept: an attach whose outcome is unknown keeps the KMS
// key it created: it may be the namespace's key now.
func TestCreatedKeyOfAnUnknownAttachIsKept(t *testing.T) {
	ctx := context.Background()
	mc := servertest.Client(t)
	if err := mc.CreateNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	fk := &fakeKMS{}
	a := nskeys.New(nskeys.Config{NodeID: "n-1", Meta: unknownMeta{mc}, KMSAdmin: fk})
	if _, err := a.Attach(ctx, "team-a", "", true); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("attach: %v", err)
	}
	if created, shreds := fk.count(); created != 1 || shreds != 0 {
		t.Fatalf("%d KMS keys created, %d shredded; want the created one kept", created, shreds)
	}
	if k, err := mc.ListNamespaceKeys(ctx); err != nil || len(k) != 1 || k[0].KeyARN != "arn:aws:kms:us-east-1:111122223333:key/k1" {
		t.Fatalf("keys %+v %v", k, err)
	}
}

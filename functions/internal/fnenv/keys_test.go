package fnenv

import (
	"context"
	"errors"
	"testing"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/objstore"
)

// TestLoadKeys: without KMS a catalog still exists (keyed namespaces are never segmented
// in clear) with no keyring; LOAM_KMS_ENDPOINT gives it one; bad values are refused
// naming the variable.
func TestLoadKeys(t *testing.T) {
	ctx := context.Background()
	env := &Env{Bucket: objstore.NewMem(), Meta: servertest.Client(t), Logger: Logger()}
	for _, v := range []string{"LOAM_KMS", "LOAM_KMS_ENDPOINT", "LOAM_KMS_REGION", "LOAM_SEGMENT_SSE_KMS", "LOAM_SEGMENT_PAGE_BYTES"} {
		t.Setenv(v, "")
	}
	k, err := env.LoadKeys(ctx)
	if err != nil || k.Catalog == nil || k.Catalog.Keyring() != nil || k.SSEKMS || k.PageSize != 0 {
		t.Fatalf("no KMS: %+v %v", k, err)
	}
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("LOAM_KMS_ENDPOINT", srv.URL)
	t.Setenv("LOAM_SEGMENT_SSE_KMS", "true")
	t.Setenv("LOAM_SEGMENT_PAGE_BYTES", "128KiB")
	if k, err = env.LoadKeys(ctx); err != nil || k.Catalog.Keyring() == nil || !k.SSEKMS || k.PageSize != 128<<10 {
		t.Fatalf("with a KMS endpoint: %+v %v", k, err)
	}
	for v, bad := range map[string]string{"LOAM_KMS": "gcp", "LOAM_SEGMENT_SSE_KMS": "maybe", "LOAM_SEGMENT_PAGE_BYTES": "1KiB"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, bad)
			if _, err := env.LoadKeys(ctx); !errors.Is(err, ErrEnv) {
				t.Fatalf("%s=%s: %v, want ErrEnv", v, bad, err)
			}
		})
	}
}

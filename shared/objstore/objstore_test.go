package objstore_test

import (
	"testing"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/objstore/objstoretest"
)

func TestMemConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return objstore.NewMem() })
}

func TestFSConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		b, err := objstore.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestWrappersConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.Counting(objstore.WithLatency(objstore.NewMem(), 0, 0))
	})
}

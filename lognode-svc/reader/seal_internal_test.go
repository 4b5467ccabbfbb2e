package reader

import (
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

// TestDropNamespaceDiskCache: a shred drops the disk-cache files of the namespace's objects
// (ns/<id>/...), also those a previous process left (found by name after a restart), and
// nothing else.
func TestDropNamespaceDiskCache(t *testing.T) {
	dir := t.TempDir()
	d, err := openDiskCache(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d.put("ns/5/seg/1/0/a.seg#0", []byte("tenant five"))
	d.put("ns/50/seg/2/0/a.seg#0", []byte("tenant fifty"))
	d.put("seg/3/0/a.seg#0", []byte("plain"))
	// A restart: the new process knows the files by name only.
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: &fakeIndex{}, DiskCacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DropNamespace(nil, "ns/5/"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.disk.get("ns/5/seg/1/0/a.seg#0"); ok {
		t.Fatal("the shredded namespace's block is still on disk")
	}
	for _, k := range []string{"ns/50/seg/2/0/a.seg#0", "seg/3/0/a.seg#0"} {
		if _, ok := r.disk.get(k); !ok {
			t.Fatalf("%s was dropped too", k)
		}
	}
}

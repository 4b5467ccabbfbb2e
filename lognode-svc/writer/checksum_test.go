package writer

import (
	"context"
	"hash/crc32"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

// TestChunkChecksumFromRequests: a chunk whose requests all carry their checksum takes the
// chunk's from them (a wrong one shows: the chunk fails its check), one request without
// makes the chunk's read from the bytes, and right checksums give the object the bytes
// alone would.
func TestChunkChecksumFromRequests(t *testing.T) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	a, b := batchOf(t, 2, "a"), batchOf(t, 3, "b")
	sumA, sumB := crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli)
	want := string(a) + string(b) // the writer patches the requests' offsets once committed
	for _, tc := range []struct {
		name      string
		reqs      []Request
		chunkGood bool
	}{
		{"right sums", []Request{{StreamID: 1, Batches: a, Records: 2, Checksum: sumA, Checksummed: true},
			{StreamID: 1, Batches: b, Records: 3, Checksum: sumB, Checksummed: true}}, true},
		{"a wrong sum", []Request{{StreamID: 1, Batches: a, Records: 2, Checksum: sumA, Checksummed: true},
			{StreamID: 1, Batches: b, Records: 3, Checksum: sumB ^ 1, Checksummed: true}}, false},
		{"one without", []Request{{StreamID: 1, Batches: a, Records: 2, Checksum: sumA ^ 1, Checksummed: true},
			{StreamID: 1, Batches: b, Records: 3}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := objstore.NewMem()
			w := newTestWriter(t, bucket, newFakeMeta(), nil)
			for i := range tc.reqs {
				tc.reqs[i].Batches = []byte(string(tc.reqs[i].Batches))
			}
			if _, err := w.Write(context.Background(), tc.reqs); err != nil {
				t.Fatal(err)
			}
			var chunks, bad int
			err := bucket.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error {
				obj, err := bucket.Get(context.Background(), o.Key)
				if err != nil {
					return err
				}
				wo, err := walfmt.Decode(obj) // checks every chunk's checksum
				if err != nil {
					chunks++
					bad++
					return nil
				}
				for _, ref := range wo.Chunks {
					chunks++
					_, payload, err := walfmt.DecodeChunk(obj[ref.Offset : ref.Offset+ref.Length])
					if err != nil {
						bad++
						continue
					}
					if string(payload) != want {
						t.Fatalf("chunk payload is not the two requests' batches")
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if chunks != 1 || (bad == 0) != tc.chunkGood {
				t.Fatalf("%d chunks, %d failing their check; want 1, good %v", chunks, bad, tc.chunkGood)
			}
		})
	}
}

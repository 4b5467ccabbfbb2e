package segmenter

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/oklog/ulid/v2"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// BenchmarkKeyedSegments: writing one 16 MiB segment from 64 WAL chunks (256 KiB each, 1 KiB
// records) and reading it back cold (a new keyring and bucket per read: one KMS Decrypt, its
// footer, then 1 MiB blocks as the log node's reader reads them, each checked against the
// footer), without and with a namespace key (sealed chunks opened, the segment sealed in
// 64 KiB pages), on the embedded local-kms and the memory bucket.
func BenchmarkKeyedSegments(b *testing.B) {
	ctx := context.Background()
	srv, err := localkms.Start(b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	raw := kms.New(kms.Options{Region: localkms.Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	for _, keyed := range []bool{false, true} {
		name := "plain"
		if keyed {
			name = "keyed"
		}
		bucket, mf := objstore.NewMem(), metafake.New()
		mf.AddStream(1, 1)
		catalog := func() *envelope.Catalog {
			cat, err := envelope.FunctionKeys(mf, bucket, raw, quiet())
			if err != nil {
				b.Fatal(err)
			}
			return cat
		}
		if keyed {
			ck, err := raw.CreateKey(ctx, &kms.CreateKeyInput{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := mf.AttachNamespaceKey(ctx, meta.DefaultNS, *ck.KeyMetadata.Arn); err != nil {
				b.Fatal(err)
			}
		}
		writer := catalog()
		var total int64
		for i := range 64 {
			id := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
			key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
			payload, err := recordbatch.Append(nil, records("r", 256, 1000, int64(i)), recordbatch.DefaultBuildOptions())
			if err != nil {
				b.Fatal(err)
			}
			c := walfmt.Chunk{StreamID: 1, Partition: 0, Encoding: walfmt.EncodingKafka, Records: 256, Payload: payload}
			if keyed {
				sealed, n, _, err := writer.SealChunk(ctx, envelope.ChunkID{Object: key, StreamID: 1}, payload)
				if err != nil {
					b.Fatal(err)
				}
				c.Payload, c.Encrypted, c.EnvelopeLen = sealed, true, n
			}
			obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard}, []walfmt.Chunk{c})
			if err != nil {
				b.Fatal(err)
			}
			bucket.Put(ctx, key, obj)
			mf.Commit(1, 0, meta.IndexEntry{Count: refs[0].Records, Kind: meta.KindWAL, Object: key, Offset: refs[0].Offset, Length: refs[0].Length})
			total += int64(len(payload))
		}
		var keys *envelope.Catalog
		if keyed {
			keys = catalog()
		}
		s, err := New(Config{Bucket: bucket, Meta: mf, Keys: keys, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		p := coord.Partition{StreamID: 1, Partition: 0}
		run := mf.Entries(1, 0)
		var entry meta.IndexEntry
		b.Run("write/"+name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				if entry, err = s.write(ctx, p, run); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("coldfetch/"+name, func(b *testing.B) {
			b.SetBytes(entry.Length)
			for b.Loop() {
				var rd objstore.Bucket = bucket
				if keyed {
					if rd, err = envelope.NewPagesBucket(envelope.PagesConfig{Bucket: bucket, Keys: catalog()}); err != nil {
						b.Fatal(err)
					}
				}
				info, err := segfmt.ReadInfoAt(ctx, rd, entry.Object, entry.Offset+entry.Length)
				if err != nil {
					b.Fatal(err)
				}
				for lo := info.DataOffset; lo < info.DataOffset+info.DataLength; lo += 1 << 20 {
					from := sort.Search(len(info.Batches), func(i int) bool { return info.Batches[i].Offset >= lo })
					to := sort.Search(len(info.Batches), func(i int) bool { return info.Batches[i].Offset >= lo+1<<20 })
					if from == to {
						continue
					}
					off, n := info.Span(from, to)
					blk, err := rd.GetRange(ctx, entry.Object, off, n)
					if err != nil {
						b.Fatal(err)
					}
					if err := info.CheckBatches(from, to, blk); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

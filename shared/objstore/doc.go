// Package objstore is Loam's object-store seam: a small Bucket interface with its contract
// written on it, and its implementations: S3 through aws-sdk-go-v2 (AWS, LocalStack, any S3
// API), a filesystem bucket that is the embedded default, and an in-memory bucket. One
// conformance suite, objstoretest.Run, runs over every implementation, real S3 servers
// (versitygw, moto) included.
//
// # Basics
//
//	b, err := objstore.Open(ctx, "file:///var/lib/loam")  // or mem://, s3://bucket/prefix?...
//	err = b.Put(ctx, "wal/c1/n1/0001.wal", body, objstore.IfAbsent())
//	if errors.Is(err, objstore.ErrPreconditionFailed) { ... someone else wrote it ... }
//	part, err := b.GetRange(ctx, "wal/c1/n1/0001.wal", off, n)  // n < 0: to the end
//	err = b.List(ctx, "wal/c1/", func(info objstore.ObjectInfo) error { ... })
//
// Keys are '/'-separated UTF-8 parts, never empty, "." or ".." (CheckKey). Every error
// names the operation and key and wraps one of ErrNotFound, ErrPreconditionFailed,
// ErrInvalidRange or ErrInvalidKey where one applies; test with errors.Is.
//
// GetRange has one rule on every backend: off < 0 or off > size fails with
// ErrInvalidRange; off == size returns an empty body; n < 0 reads to the end; a range past
// the end is cut at the end; n == 0 returns an empty body once the key is known to exist
// and off <= size.
//
// Implementations:
//   - Mem (NewMem): a map behind a lock; copies bodies in and out. A product: unit tests of
//     other packages and latency benchmarks run on it.
//   - FS (NewFS): one file per object. Put writes a temporary file, fsyncs it, renames it
//     into place (IfAbsent: link(2), which fails with EEXIST if the name exists, so exactly
//     one of many racers wins), removes the temporary name and fsyncs the directory; new
//     directories are fsynced into their parents. The key "wal/c1/0001.wal" is the file
//     "wal%/c1%/0001.wal": parts are escaped ('%' as "%25", NUL as "%00"), directories end
//     in '%' so that "a" and "a/b" can both be objects, and temporary files are
//     "%tmp-*", a name no object or directory has. List sorts each directory's entries by
//     key (a directory "p" as "p/"), so it yields key order, not readdir order ("a.b"
//     before "a/b"). Delete removes the directories it empties, best effort.
//   - S3 (NewS3): PutObject (IfAbsent: If-None-Match: *, 412 → ErrPreconditionFailed),
//     GetObject with a Range header, HeadObject, ListObjectsV2 with paging, DeleteObject.
//     Every PUT carries a CRC32 of its body, which the server checks before it stores
//     the object, and whole-object GETs are checked against the server's checksum;
//     S3Config.NoChecksums (checksums=false) limits both to where S3 requires them, for
//     S3 APIs that reject them.
//
// Wrappers: WithLatency adds a fixed delay to writes and reads; WithLatencyModel draws each
// call's delay from a seeded log-normal model of a store (S3Standard, S3Express; `loam dev
// --objstore-latency`), so benchmarks and fault tests model S3 on a Mem bucket; Counting
// counts calls and bytes (Stats, Stats.Sub).
//
// # Caveats
//
//   - FS: atomicity and durability rest on POSIX rename(2) and link(2) within one
//     filesystem and on fsync; a network filesystem without atomic link, or a filesystem
//     that lies about fsync, voids them. A crash can leave "%tmp-*" files: they are
//     invisible to Get, Stat and List but take space until removed by hand. A key part
//     longer than 255 bytes after escaping fails with ErrInvalidKey on FS only. On a
//     case-insensitive filesystem keys differing only in case collide. List reads one
//     directory at a time: objects put or deleted during a List may or may not appear.
//     LastModified is the file's mtime.
//   - S3: AWS S3 is strongly read-after-write consistent, including List; other servers may
//     not be. Conditional puts may meet 409 ConditionalRequestConflict while another
//     conditional write of the key is in flight: Put retries it (up to 10 times with
//     backoff) and answers ErrPreconditionFailed if the object exists afterwards.
//     Conditional puts bypass the SDK's retries and retry 5xx and network errors
//     themselves; when a retry then meets 412, the earlier attempt may have written the
//     object, and Put succeeds if the stored body is byte-equal to its own (so two writers
//     of identical bytes can both succeed in that case only). Plain puts use the SDK's
//     retries. A GetRange at off == size costs a HEAD after the server's 416, and n == 0 a
//     HEAD. S3 LastModified has one-second resolution. A missing bucket is not
//     ErrNotFound, except on HEAD (Stat, off == size), where S3 sends no error code.
//   - versitygw's posix backend cannot hold "a" and "a/b" at once (409
//     ExistingObjectIsDirectory); AWS, moto, FS and Mem can. The suite skips that case for
//     versitygw only (objstoretest.SkipObjectAndPrefix).
//   - Mem keeps everything in memory and List sorts all matching keys on each call.
package objstore

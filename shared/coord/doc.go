// Package coord is the coordination store of Loam's serverless side: the node registry, the
// record of handled object-store notifications, work accounting per partition, the GC
// schedule and GC's orphan clock. It is never a second source of truth: every fact in it
// can be rebuilt from the sequencer and the bucket, and losing it costs repeated work,
// never data.
//
// # Basics
//
// Store is a small conditional item store, DynamoDB's data model cut down: items addressed
// by a partition key and a sort key, holding string attributes and int64 counters, with
// conditional writes (IfAbsent, IfVersion), atomic counters (Add), prefix queries in
// sort-key order, and expiry. Its contract is written on the interface. Two
// implementations ship:
//
//   - Dynamo (NewDynamo) on a DynamoDB table: production, LocalStack, moto.
//   - Bolt (NewBolt) in one bbolt file: the embedded cluster (loam dev).
//
// The domain helpers are plain structs over any Store, so both implementations share one
// piece of logic and one conformance suite (package coordtest) proves each helper on each
// store:
//
//	s, _ := coord.NewBolt(path)                     // or coord.NewDynamo(ctx, cfg)
//	reg := coord.Registry{Store: s}
//	reg.Heartbeat(ctx, coord.Node{ID: id, Zone: az, HTTPAddr: addr}, 15*time.Second)
//	nodes, _ := reg.Live(ctx, clientAZ)             // same-zone nodes, else all live nodes
//
//	ntf := coord.Notifications{Store: s}
//	key := objectKey + "@" + sequencer             // one notification of one object version
//	if first, _ := ntf.Claim(ctx, key, 5*time.Minute); first {
//		if err := handle(); err != nil { ntf.Release(ctx, key) } else { ntf.Done(ctx, key) }
//	}
//
//	work := coord.Work{Store: s}
//	if n, _ := work.Add(ctx, p, coord.WorkSegment, chunkBytes); n >= 64<<20 { segment(p) }
//
//	ww := coord.WALWork{Store: s}                  // one write per WAL object
//	ww.Add(ctx, nodeID, map[coord.Partition]int64{p: chunkBytes, q: chunkBytes})
//
//	gc := coord.GCSchedule{Store: s}
//	gc.Schedule(ctx, walKey, retiredAt.Add(grace))
//	gc.Due(ctx, time.Now(), func(e coord.GCEntry) error { return deleteThenRemove(e) })
//
// # Item layout
//
// Keys and names are chosen by the helpers; the storage seam knows none of them.
//
//	helper         pk                    sk                                attributes / counters          expiry
//	Registry       "nodes"               node ID                           zone http grpc kafka peer journal seen(ms)  heartbeat + TTL
//	Notifications  "ntf/" + key          "n"                               state at(ms) by(token)         claim + TTL, done + Keep
//	Work           "work/" + stream ID   partition, 10 zero-padded digits  counter per WorkKind           never
//	WALWork        "walwork"             log node ID                       counter per "<stream>/<part>"  never (Compact)
//	GCSchedule     "gc"                  due ms (20 digits) "/" object key key                            never (Remove)
//	Orphans        "orphans"             object key                        first(ms)                      Record's ttl
//	  sweep clock  "orphans/sweep"       "last"                            at(ms)                         never
//
// In DynamoDB an item is the attributes pk (S, hash key), sk (S, range key), ver (N, the
// Version), expires_at (N, epoch seconds, the table's TTL attribute; absent when the item
// never expires), "a_"+name (S) per attribute and "c_"+name (N) per counter. In bbolt a
// root bucket "coord.v1" holds a bucket per partition key whose keys are sort keys and
// whose values use the item encoding drawn in boltcodec.go (magic, version, CRC32C).
//
// # Caveats
//
//   - Expiry is judged by the writer's and reader's clocks (Store.Now), in whole seconds.
//     Skewed clocks shift when a claim lapses or a node drops out by the skew; keep TTLs
//     well above it (seconds, not milliseconds).
//   - DynamoDB's TTL deletes expired items up to days late and moto never does; every read
//     and condition therefore filters expired items itself, and Bolt does the same until
//     Bolt.Sweep removes them. Neither is observable through Store.
//   - Versions are random 63-bit tags, not counters: compare them for equality only.
//   - A conditional write whose answer was lost can be retried by the AWS SDK and then fail
//     its condition although the first attempt succeeded (ErrConditionFailed for a write
//     that took effect). Notifications.Claim guards against this with a token; other
//     callers that must know should do the same.
//   - The DynamoDB store does plain single-item operations: no transactions, so a helper
//     never changes two items atomically. Items are limited to 400 KB in DynamoDB.
//   - Registry, GCSchedule, Orphans and WALWork each use a single partition key: fine for
//     hundreds of nodes, for the rate at which objects are retired or orphaned, and for one
//     WALWork write per WAL object; not for thousands of writes a second. A WALWork item
//     is one per log node and holds a counter per partition with pending bytes (about 30
//     bytes each): DynamoDB bills its updates by the item's size, and its 400 KB limit caps
//     it at some 13,000 such partitions per node.
//   - AddAll takes at most MaxAddAll counters per call (DynamoDB's 4 KB expression limit).
//   - Query over DynamoDB reads 100 items a request; large partitions cost many requests.
//   - moto applies DynamoDB requests without a lock, so concurrent conditional writes against
//     moto are not atomic; the tests serialize requests to it (dynamo_test.go).
//
// Lock order: Bolt holds no lock of its own; bbolt serializes its write transactions, and
// Query calls fn only after its read transaction has ended, so fn may write to the store.
package coord

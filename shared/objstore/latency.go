package objstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// LatencyDist is a log-normal latency distribution given by its median and its 99th
// percentile: a sample is Median·exp(σ·Z) with Z standard normal and σ = ln(P99/Median) /
// 2.3263 (the 0.99 quantile of Z). Log-normal is the usual shape of object-store request
// latency: a narrow body with a long right tail. Samples are capped at 4·P99 so one draw
// from the far tail cannot stall a benchmark; a zero Median means no delay.
type LatencyDist struct {
	Median, P99 time.Duration
}

// z99 is the 0.99 quantile of the standard normal distribution.
const z99 = 2.3263478740408408

func (d LatencyDist) sigma() float64 {
	if d.Median <= 0 || d.P99 <= d.Median {
		return 0
	}
	return math.Log(float64(d.P99)/float64(d.Median)) / z99
}

// sample draws one latency using the standard normal deviate z.
func (d LatencyDist) sample(z float64) time.Duration {
	if d.Median <= 0 {
		return 0
	}
	v := time.Duration(float64(d.Median) * math.Exp(d.sigma()*z))
	return min(v, 4*max(d.P99, d.Median))
}

// LatencyModel is the per-operation latency of an object store, applied by
// WithLatencyModel before each call reaches the wrapped bucket:
//
//	Put            Put + max(0, size-PutIncluded)/Throughput
//	Get, GetRange  FirstByte + size/Throughput (size of the answer)
//	Stat, List,    FirstByte
//	Delete
//
// The zero value (and the model named "none") adds nothing.
type LatencyModel struct {
	Name string
	// Put is the whole PUT request for objects up to PutIncluded bytes.
	Put         LatencyDist
	PutIncluded int64
	// FirstByte is the time to the first byte of a GET (and of the other small requests).
	FirstByte LatencyDist
	// Throughput is bytes per second of one request's body once it streams; 0 is unlimited.
	Throughput float64
}

// The models below are the figures Loam's write path is designed against, in us-east-1 from
// a same-region EC2 instance:
//
//   - S3 Standard: the Amazon S3 User Guide ("Best practices design patterns: optimizing
//     Amazon S3 performance") describes first-byte latencies of tens of milliseconds with a
//     long tail that latency-sensitive applications cut by retrying; published measurements
//     of 4–8 MiB PUTs from EC2 put the median near 100 ms and the p99 near 400 ms, and the
//     GET first byte at 20–30 ms median. One connection streams about 90 MB/s.
//   - S3 Express One Zone: AWS describes "consistent single-digit millisecond" first-byte
//     latency (S3 Express One Zone product page and User Guide); we model 5 ms median and
//     20 ms p99 for PUTs and first bytes alike.
//
// These are models, not measurements of this machine: a benchmark on an in-memory bucket
// wrapped in one of them shows what the write path adds on top of the store.
var (
	S3Standard = LatencyModel{
		Name:        "s3-standard",
		Put:         LatencyDist{Median: 100 * time.Millisecond, P99: 400 * time.Millisecond},
		PutIncluded: 8 << 20,
		FirstByte:   LatencyDist{Median: 25 * time.Millisecond, P99: 100 * time.Millisecond},
		Throughput:  90e6,
	}
	S3Express = LatencyModel{
		Name:        "s3-express",
		Put:         LatencyDist{Median: 5 * time.Millisecond, P99: 20 * time.Millisecond},
		PutIncluded: 8 << 20,
		FirstByte:   LatencyDist{Median: 5 * time.Millisecond, P99: 20 * time.Millisecond},
		Throughput:  90e6,
	}
	NoLatency = LatencyModel{Name: "none"}
)

var latencyModels = map[string]LatencyModel{
	NoLatency.Name: NoLatency, S3Standard.Name: S3Standard, S3Express.Name: S3Express,
}

// LatencyModelNames lists the names LatencyModelNamed knows, sorted.
func LatencyModelNames() []string {
	names := make([]string, 0, len(latencyModels))
	for n := range latencyModels {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LatencyModelNamed returns the model called name ("none", "s3-standard", "s3-express");
// "" is "none".
func LatencyModelNamed(name string) (LatencyModel, error) {
	if name == "" {
		return NoLatency, nil
	}
	m, ok := latencyModels[name]
	if !ok {
		return LatencyModel{}, fmt.Errorf("objstore: latency model %q: want one of %s", name, strings.Join(LatencyModelNames(), ", "))
	}
	return m, nil
}

// IsZero reports whether m adds no latency at all.
func (m LatencyModel) IsZero() bool {
	return m.Put.Median <= 0 && m.FirstByte.Median <= 0 && m.Throughput <= 0
}

func (m LatencyModel) transfer(n int64) time.Duration {
	if m.Throughput <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / m.Throughput * float64(time.Second))
}

// WithLatencyModel wraps b so that each call first waits a latency drawn from m, or until
// ctx ends (then it fails with the context's error, naming the operation and key, and does
// not reach b). Draws come from one random source seeded with seed, so a run that makes the
// same calls in the same order sees the same latencies. Reads wait after b answered, since
// their delay depends on the answer's size. Safe for concurrent use.
func WithLatencyModel(b Bucket, m LatencyModel, seed uint64) Bucket {
	if m.IsZero() {
		return b
	}
	return &modelBucket{b: b, m: m, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

type modelBucket struct {
	b  Bucket
	m  LatencyModel
	mu sync.Mutex
	// rng is guarded by mu.
	rng *rand.Rand
}

func (l *modelBucket) z() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.NormFloat64()
}

func (l *modelBucket) putDelay(size int64) time.Duration {
	return l.m.Put.sample(l.z()) + l.m.transfer(size-l.m.PutIncluded)
}

func (l *modelBucket) readDelay(size int64) time.Duration {
	return l.m.FirstByte.sample(l.z()) + l.m.transfer(size)
}

func (l *modelBucket) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	if err := wait(ctx, l.putDelay(int64(len(body))), "put", key); err != nil {
		return err
	}
	return l.b.Put(ctx, key, body, opts...)
}

func (l *modelBucket) Get(ctx context.Context, key string) ([]byte, error) {
	body, err := l.b.Get(ctx, key)
	if werr := wait(ctx, l.readDelay(int64(len(body))), "get", key); werr != nil {
		return nil, werr
	}
	return body, err
}

func (l *modelBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	body, err := l.b.GetRange(ctx, key, off, n)
	if werr := wait(ctx, l.readDelay(int64(len(body))), "get range", key); werr != nil {
		return nil, werr
	}
	return body, err
}

func (l *modelBucket) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := wait(ctx, l.readDelay(0), "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	return l.b.Stat(ctx, key)
}

func (l *modelBucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := wait(ctx, l.readDelay(0), "list", prefix); err != nil {
		return err
	}
	return l.b.List(ctx, prefix, fn)
}

func (l *modelBucket) Delete(ctx context.Context, key string) error {
	if err := wait(ctx, l.readDelay(0), "delete", key); err != nil {
		return err
	}
	return l.b.Delete(ctx, key)
}

func (l *modelBucket) Close() error { return l.b.Close() }

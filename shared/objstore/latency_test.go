package objstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/objstore/objstoretest"
)

func TestLatencyModelConformance(t *testing.T) {
	tiny := objstore.LatencyModel{Name: "tiny",
		Put:       objstore.LatencyDist{Median: 20 * time.Microsecond, P99: 80 * time.Microsecond},
		FirstByte: objstore.LatencyDist{Median: 10 * time.Microsecond, P99: 40 * time.Microsecond},
	}
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.WithLatencyModel(objstore.NewMem(), tiny, 7)
	})
}

// delays measures, on the fake clock of a synctest bubble, how long each of n calls of op
// takes through a fresh model bucket.
func delays(t *testing.T, m objstore.LatencyModel, seed uint64, n int, op func(context.Context, objstore.Bucket, int) error) []time.Duration {
	t.Helper()
	var out []time.Duration
	synctest.Test(t, func(t *testing.T) {
		b := objstore.WithLatencyModel(objstore.NewMem(), m, seed)
		ctx := context.Background()
		for i := range n {
			t0 := time.Now()
			if err := op(ctx, b, i); err != nil {
				t.Fatal(err)
			}
			out = append(out, time.Since(t0))
		}
	})
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func near(t *testing.T, what string, got, want time.Duration, tol float64) {
	t.Helper()
	if r := float64(got) / float64(want); r < 1-tol || r > 1+tol {
		t.Errorf("%s = %v, want %v ± %.0f%%", what, got, want, tol*100)
	}
}

func TestLatencyModelQuantiles(t *testing.T) {
	small := []byte("x")
	put := func(ctx context.Context, b objstore.Bucket, i int) error {
		return b.Put(ctx, "k", small)
	}
	get := func(ctx context.Context, b objstore.Bucket, i int) error {
		if i == 0 {
			// The first Get also pays for the Put that creates the object: excluded below.
			if err := b.Put(ctx, "k", small); err != nil {
				return err
			}
		}
		_, err := b.Get(ctx, "k")
		return err
	}
	for _, m := range []objstore.LatencyModel{objstore.S3Standard, objstore.S3Express} {
		t.Run(m.Name, func(t *testing.T) {
			p := delays(t, m, 1, 5000, put)
			near(t, "PUT p50", quantile(p, 0.50), m.Put.Median, 0.06)
			near(t, "PUT p99", quantile(p, 0.99), m.Put.P99, 0.15)
			if mx := slices.Max(p); mx > 4*m.Put.P99 {
				t.Errorf("PUT max %v above the cap 4·p99", mx)
			}
			g := delays(t, m, 2, 5001, get)[1:]
			near(t, "GET p50", quantile(g, 0.50), m.FirstByte.Median, 0.06)
			near(t, "GET p99", quantile(g, 0.99), m.FirstByte.P99, 0.15)
		})
	}
}

func TestLatencyModelTransferTime(t *testing.T) {
	m := objstore.LatencyModel{Name: "bw", PutIncluded: 1 << 20, Throughput: 1e6} // 1 MB/s, no fixed part
	big := make([]byte, 3<<20)
	d := delays(t, m, 1, 2, func(ctx context.Context, b objstore.Bucket, i int) error {
		if i == 0 {
			return b.Put(ctx, "big", big) // pays for 2 MiB beyond PutIncluded
		}
		_, err := b.GetRange(ctx, "big", 0, 500_000) // pays for the 500 kB answered
		return err
	})
	near(t, "PUT of 3 MiB", d[0], time.Duration(float64(2<<20)/1e6*float64(time.Second)), 0.001)
	near(t, "GET range of 500 kB", d[1], 500*time.Millisecond, 0.001)
}

func TestLatencyModelSeeded(t *testing.T) {
	put := func(ctx context.Context, b objstore.Bucket, i int) error { return b.Put(ctx, "k", nil) }
	a := delays(t, objstore.S3Standard, 42, 50, put)
	b := delays(t, objstore.S3Standard, 42, 50, put)
	c := delays(t, objstore.S3Standard, 43, 50, put)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different latencies:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 drew the same latencies")
	}
}

func TestLatencyModelContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := objstore.NewMem()
		b := objstore.WithLatencyModel(mem, objstore.S3Standard, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		err := b.Put(ctx, "wal/x", []byte("body"))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "put wal/x") {
			t.Fatalf("Put past its deadline: %v, want DeadlineExceeded naming the operation and key", err)
		}
		if _, err := mem.Get(context.Background(), "wal/x"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("a Put that timed out in the model reached the bucket: %v", err)
		}
	})
}

func TestLatencyModelNamed(t *testing.T) {
	for _, name := range []string{"", "none", "s3-standard", "s3-express"} {
		m, err := objstore.LatencyModelNamed(name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if (name == "" || name == "none") != m.IsZero() {
			t.Errorf("%q: IsZero = %v", name, m.IsZero())
		}
	}
	if _, err := objstore.LatencyModelNamed("s3-glacier"); err == nil || !strings.Contains(err.Error(), `"s3-glacier"`) || !strings.Contains(err.Error(), "s3-express") {
		t.Fatalf("unknown model: %v, want an error naming it and the known ones", err)
	}
	mem := objstore.NewMem()
	if objstore.WithLatencyModel(mem, objstore.NoLatency, 1) != objstore.Bucket(mem) {
		t.Error("the none model wraps the bucket instead of returning it")
	}
}

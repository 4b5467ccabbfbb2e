package objstore_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

// The S3 client's retry policy against scripted faults: 503 SlowDown and 500 are retried
// with backoff up to the attempt cap, a hung attempt is cut by the attempt timeout and
// retried, and the retry budget stops retries once most requests fail.
func TestS3RetryPolicy(t *testing.T) {
	ctx := context.Background()
	t.Run("slowdown then success", func(t *testing.T) {
		f, b := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n < 2 {
				s3Err(w, http.StatusServiceUnavailable, "SlowDown")
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		start := time.Now()
		if err := b.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if got := f.methods(); got != "PUT PUT PUT" {
			t.Fatalf("requests %s", got)
		}
		// Throttling backs off from 200 ms: at most 200 + 400 ms of waiting.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("500 up to the attempt cap", func(t *testing.T) {
		f, b := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, n int) {
			s3Err(w, http.StatusInternalServerError, "InternalError")
		})
		err := b.Put(ctx, "k", []byte("v"))
		if err == nil || !strings.Contains(err.Error(), "InternalError") {
			t.Fatalf("put: %v", err)
		}
		if n := len(strings.Fields(f.methods())); n != objstore.S3MaxAttempts {
			t.Fatalf("%d attempts, want %d", n, objstore.S3MaxAttempts)
		}
	})
	t.Run("hung attempt retried", func(t *testing.T) {
		f, b := newFakeS3With(t, objstore.S3Config{AttemptTimeout: 200 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 0 {
				select {
				case <-time.After(5 * time.Second):
				case <-r.Context().Done():
				}
				return
			}
			w.Header().Set("Content-Length", "1")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("v"))
		})
		start := time.Now()
		got, err := b.Get(ctx, "k")
		if err != nil || string(got) != "v" {
			t.Fatalf("get: %q %v", got, err)
		}
		if d := time.Since(start); d > 3*time.Second || f.methods() != "GET GET" {
			t.Fatalf("took %v with %s", d, f.methods())
		}
	})
	t.Run("retry budget", func(t *testing.T) {
		var requests atomic.Int64
		_, b := newFakeS3With(t, objstore.S3Config{}, func(w http.ResponseWriter, r *http.Request, n int) {
			requests.Add(1)
			s3Err(w, http.StatusInternalServerError, "InternalError")
		})
		// 500 tokens at 14 a retry: about 35 retries, then each request gets one attempt.
		const calls = 30
		for range calls {
			b.Stat(ctx, "k")
		}
		n := requests.Load()
		if n >= calls*objstore.S3MaxAttempts || n < calls+30 {
			t.Fatalf("%d requests for %d calls: want the budget to stop retries after about 35", n, calls)
		}
		t.Logf("%d calls failing with 500 made %d requests", calls, n)
	})
}

package objstore_test

// Unit tests of the S3 bucket's error handling against a scripted HTTP server: answers the
// real servers do not give on demand (409 ConditionalRequestConflict, a 500 that may
// have written, a server that ignores Range).

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

type fakeS3 struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	handle   func(w http.ResponseWriter, r *http.Request, n int) // n: index of this request
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	f.handle(w, r, n)
}

func (f *fakeS3) methods() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m []string
	for _, r := range f.requests {
		m = append(m, r.Method)
	}
	return strings.Join(m, " ")
}

func s3Err(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted</Message><RequestId>r</RequestId></Error>`, code)
}

func newFakeS3(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) (*fakeS3, objstore.Bucket) {
	t.Helper()
	return newFakeS3With(t, objstore.S3Config{}, handle)
}

// newFakeS3With is newFakeS3 with cfg's options (its bucket, endpoint and credentials are
// the fake's).
func newFakeS3With(t *testing.T, cfg objstore.S3Config, handle func(w http.ResponseWriter, r *http.Request, n int)) (*fakeS3, objstore.Bucket) {
	t.Helper()
	f := &fakeS3{handle: handle}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.Bucket, cfg.Endpoint, cfg.Region, cfg.AccessKey, cfg.SecretKey, cfg.PathStyle = "bkt", srv.URL, "us-east-1", "a", "s", true
	b, err := objstore.NewS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, b
}

func TestS3ConditionalPutRetriesConflict(t *testing.T) {
	defer objstore.SetConditionalBackoff(time.Millisecond, 2*time.Millisecond)()
	for _, tc := range []struct {
		name    string
		script  []string // answers to successive requests: status/code, "ok", "body:<b>"
		want    error    // nil, ErrPreconditionFailed, or errAny
		methods string
	}{
		{"409 then 412", []string{"409", "409", "412"}, objstore.ErrPreconditionFailed, "PUT PUT PUT"},
		{"409 then created", []string{"409", "ok"}, nil, "PUT PUT"},
		{"412 at once", []string{"412"}, objstore.ErrPreconditionFailed, "PUT"},
		{"500 then 412, own body stored", []string{"500", "412", "body:payload"}, nil, "PUT PUT GET"},
		{"500 then 412, other body stored", []string{"500", "412", "body:other"}, objstore.ErrPreconditionFailed, "PUT PUT GET"},
		{"409 forever, object exists", append(repeat("409", 10), "ok"), objstore.ErrPreconditionFailed, strings.TrimSpace(strings.Repeat("PUT ", 10)) + " HEAD"},
		{"409 forever, no object", append(repeat("409", 10), "404"), errAny, strings.TrimSpace(strings.Repeat("PUT ", 10)) + " HEAD"},
		{"403", []string{"403"}, errAny, "PUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, b := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n >= len(tc.script) {
					t.Errorf("unexpected request %d: %s %s", n, r.Method, r.URL)
					s3Err(w, 500, "InternalError")
					return
				}
				switch a := tc.script[n]; {
				case a == "ok" && r.Method == http.MethodHead:
					w.Header().Set("Content-Length", "7")
				case a == "ok":
					w.WriteHeader(200)
				case strings.HasPrefix(a, "body:"):
					w.Header().Set("Content-Length", fmt.Sprint(len(a)-5))
					io.WriteString(w, a[5:])
				case a == "404" && r.Method == http.MethodHead:
					w.WriteHeader(404)
				default:
					var status int
					fmt.Sscan(a, &status)
					code := map[int]string{409: "ConditionalRequestConflict", 412: "PreconditionFailed", 500: "InternalError", 403: "AccessDenied", 404: "NoSuchKey"}[status]
					s3Err(w, status, code)
				}
			})
			err := b.Put(t.Context(), "k", []byte("payload"), objstore.IfAbsent())
			switch {
			case tc.want == errAny:
				if err == nil || errors.Is(err, objstore.ErrPreconditionFailed) {
					t.Errorf("err = %v, want another error", err)
				}
			case !errors.Is(err, tc.want) && !(tc.want == nil && err == nil):
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if got := f.methods(); got != tc.methods {
				t.Errorf("requests = %s, want %s", got, tc.methods)
			}
			for i, r := range f.requests {
				if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "*" {
					t.Errorf("request %d: If-None-Match = %q, want *", i, r.Header.Get("If-None-Match"))
				}
			}
		})
	}
}

var errAny = errors.New("any error but ErrPreconditionFailed")

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestS3PutChecksums: by default a PutObject (plain and conditional) carries the CRC32 of
// its body in x-amz-checksum-crc32, signed; with NoChecksums (or the SDK's environment
// switch) it carries a plain body and no checksum header, which servers that reject
// checksums accept.
func TestS3PutChecksums(t *testing.T) {
	ok := func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(200) }
	body := []byte("payload")
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.ChecksumIEEE(body))
	want := base64.StdEncoding.EncodeToString(crc[:])
	for _, ifAbsent := range []bool{false, true} {
		var opts []objstore.PutOption
		if ifAbsent {
			opts = append(opts, objstore.IfAbsent())
		}
		f, b := newFakeS3(t, ok)
		if err := b.Put(t.Context(), "dir/k", body, opts...); err != nil {
			t.Fatal(err)
		}
		r := f.requests[0]
		if got := r.Header.Get("X-Amz-Checksum-Crc32"); got != want {
			t.Errorf("if-absent %v: x-amz-checksum-crc32 = %q, want %q (CRC32 of the body)", ifAbsent, got, want)
		}
		if !strings.Contains(r.Header.Get("Authorization"), "x-amz-checksum-crc32") {
			t.Errorf("if-absent %v: checksum header not signed: %s", ifAbsent, r.Header.Get("Authorization"))
		}
		if f.bodies[0] != string(body) {
			t.Errorf("if-absent %v: body = %q, want the plain payload over http", ifAbsent, f.bodies[0])
		}
	}

	t.Run("NoChecksums", func(t *testing.T) {
		f, b := newFakeS3With(t, objstore.S3Config{NoChecksums: true}, ok)
		checkNoChecksum(t, f, b, body)
	})
	t.Run("env", func(t *testing.T) { // the SDK's own switch, for every bucket of a process
		t.Setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
		f, b := newFakeS3(t, ok)
		checkNoChecksum(t, f, b, body)
	})
}

func checkNoChecksum(t *testing.T, f *fakeS3, b objstore.Bucket, body []byte) {
	t.Helper()
	if err := b.Put(t.Context(), "dir/k", body); err != nil {
		t.Fatal(err)
	}
	r := f.requests[0]
	if r.URL.Path != "/bkt/dir/k" {
		t.Errorf("path = %q, want /bkt/dir/k (path style)", r.URL.Path)
	}
	if f.bodies[0] != string(body) {
		t.Errorf("body = %q, want the plain payload", f.bodies[0])
	}
	for name := range r.Header {
		if l := strings.ToLower(name); strings.HasPrefix(l, "x-amz-checksum-") || l == "x-amz-sdk-checksum-algorithm" || l == "x-amz-trailer" {
			t.Errorf("unexpected checksum header %s: %s", name, r.Header.Get(name))
		}
	}
	if ce := r.Header.Get("Content-Encoding"); strings.Contains(ce, "aws-chunked") {
		t.Errorf("Content-Encoding = %q", ce)
	}
	if r.Header.Get("If-None-Match") != "" {
		t.Errorf("plain Put sent If-None-Match")
	}
}

// TestS3GetVerifiesChecksum: a whole-object GET whose body does not match the checksum
// the server returns fails (with checksums on) instead of returning corrupt bytes.
func TestS3GetVerifiesChecksum(t *testing.T) {
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.ChecksumIEEE([]byte("payload")))
	serve := func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("x-amz-checksum-crc32", base64.StdEncoding.EncodeToString(crc[:]))
		w.Header().Set("Content-Length", "7")
		io.WriteString(w, "paylXad")
	}
	_, b := newFakeS3(t, serve)
	if got, err := b.Get(t.Context(), "k"); err == nil {
		t.Fatalf("Get of a corrupt body = %q, want a checksum error", got)
	} else {
		t.Logf("corrupt body: %v", err)
	}
	_, off := newFakeS3With(t, objstore.S3Config{NoChecksums: true}, serve)
	if got, err := off.Get(t.Context(), "k"); err != nil || string(got) != "paylXad" {
		t.Fatalf("NoChecksums: Get = %q, %v; want the body unchecked", got, err)
	}
}

// TestS3GetRangeServerIgnoresRange: a server that answers a ranged GET with the whole
// object (200, no Content-Range) still yields the asked range.
func TestS3GetRangeServerIgnoresRange(t *testing.T) {
	const obj = "0123456789"
	f, b := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Length", fmt.Sprint(len(obj)))
		if r.Method == http.MethodHead {
			return
		}
		io.WriteString(w, obj)
	})
	for _, tc := range []struct {
		off, n int64
		want   string
		err    error
	}{
		{2, 3, "234", nil}, {8, -1, "89", nil}, {8, 10, "89", nil}, {10, 1, "", nil}, {11, 1, "", objstore.ErrInvalidRange},
	} {
		got, err := b.GetRange(t.Context(), "k", tc.off, tc.n)
		if !errors.Is(err, tc.err) || string(got) != tc.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q, %v", tc.off, tc.n, got, err, tc.want, tc.err)
		}
	}
	if h := f.requests[0].Header.Get("Range"); h != "bytes=2-4" {
		t.Errorf("Range = %q, want bytes=2-4", h)
	}
	if h := f.requests[1].Header.Get("Range"); h != "bytes=8-" {
		t.Errorf("Range = %q, want bytes=8-", h)
	}
}

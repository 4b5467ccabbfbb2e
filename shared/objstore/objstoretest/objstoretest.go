// Package objstoretest is the conformance suite every objstore.Bucket implementation
// passes: the in-memory and filesystem buckets, and the S3 bucket against real servers
// (versitygw, moto). Other Bucket implementations (express, wrappers) run it too.
package objstoretest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

// Option adjusts a Run.
type Option func(*options)

type options struct {
	skip map[string]string // subtest name -> reason
}

// SkipObjectAndPrefix skips the subtest in which one key is both an object and the prefix
// of others ("a" and "a/b"), which S3 allows; reason names the server that cannot (the
// versitygw posix backend answers 409 ExistingObjectIsDirectory).
func SkipObjectAndPrefix(reason string) Option {
	return func(o *options) { o.skip["ObjectAndPrefix"] = reason }
}

// SkipIfAbsentRace skips the subtest in which 16 writers race one conditional create;
// reason names the server whose check and write are not atomic (moto_server, a threaded
// Python server, lets two racers win under load). Every bucket a deployment uses must pass it.
func SkipIfAbsentRace(reason string) Option {
	return func(o *options) { o.skip["IfAbsentRace"] = reason }
}

// Run runs the suite. newBucket must return a new, empty bucket for the (sub)test it is
// given; it is called from parallel subtests, once each, and the bucket is closed at the
// end of the subtest.
func Run(t *testing.T, newBucket func(t *testing.T) objstore.Bucket, opts ...Option) {
	o := options{skip: map[string]string{}}
	for _, f := range opts {
		f(&o)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, b objstore.Bucket)
	}{
		{"PutGet", testPutGet},
		{"BodiesAreCopied", testBodiesAreCopied},
		{"IfAbsent", testIfAbsent},
		{"IfAbsentRace", testIfAbsentRace},
		{"GetRange", testGetRange},
		{"GetRangeEmptyObject", testGetRangeEmptyObject},
		{"Stat", testStat},
		{"List", testList},
		{"ListPaging", testListPaging},
		{"ObjectAndPrefix", testObjectAndPrefix},
		{"Delete", testDelete},
		{"NotFound", testNotFound},
		{"InvalidKeys", testInvalidKeys},
		{"KeyCharacters", testKeyCharacters},
		{"LargeObject", testLargeObject},
		{"ConcurrentReadersWriters", testConcurrentReadersWriters},
		{"CanceledContext", testCanceledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if reason, ok := o.skip[tc.name]; ok {
				t.Skip(reason)
			}
			t.Parallel()
			b := newBucket(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, b)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, b objstore.Bucket, key string, body []byte, opts ...objstore.PutOption) {
	t.Helper()
	if err := b.Put(ctxFor(t), key, body, opts...); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(body), err)
	}
}

func mustGet(t *testing.T, b objstore.Bucket, key string, want []byte) {
	t.Helper()
	got, err := b.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %s, want %s", key, brief(got), brief(want))
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// brief prints a body for a failure message.
func brief(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q...(%d bytes)", b[:64], len(b))
}

func listKeys(t *testing.T, b objstore.Bucket, prefix string) []objstore.ObjectInfo {
	t.Helper()
	var infos []objstore.ObjectInfo
	if err := b.List(ctxFor(t), prefix, func(info objstore.ObjectInfo) error {
		infos = append(infos, info)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return infos
}

func keysOf(infos []objstore.ObjectInfo) []string {
	keys := make([]string, len(infos))
	for i, info := range infos {
		keys[i] = info.Key
	}
	return keys
}

func testPutGet(t *testing.T, b objstore.Bucket) {
	mustPut(t, b, "a/b/c", []byte("first"))
	mustGet(t, b, "a/b/c", []byte("first"))
	mustPut(t, b, "a/b/c", []byte("second, longer body"))
	mustGet(t, b, "a/b/c", []byte("second, longer body"))
	mustPut(t, b, "a/b/c", []byte("3rd"))
	mustGet(t, b, "a/b/c", []byte("3rd"))
	mustPut(t, b, "empty", nil)
	mustGet(t, b, "empty", []byte{})
	mustPut(t, b, "single", []byte("x"))
	mustGet(t, b, "single", []byte("x"))
}

func testBodiesAreCopied(t *testing.T, b objstore.Bucket) {
	body := []byte("original")
	mustPut(t, b, "k", body)
	copy(body, "CHANGED!")
	mustGet(t, b, "k", []byte("original"))
	got, err := b.Get(ctxFor(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "CHANGED!")
	mustGet(t, b, "k", []byte("original"))
	part, err := b.GetRange(ctxFor(t), "k", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	part = append(part[:1], "XYZ"...) // must not write into the stored body
	_ = part
	mustGet(t, b, "k", []byte("original"))
}

func testIfAbsent(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	mustPut(t, b, "c/new", []byte("one"), objstore.IfAbsent())
	mustGet(t, b, "c/new", []byte("one"))
	err := b.Put(ctx, "c/new", []byte("two"), objstore.IfAbsent())
	wantErr(t, "IfAbsent Put of an existing key", err, objstore.ErrPreconditionFailed)
	mustGet(t, b, "c/new", []byte("one"))

	mustPut(t, b, "c/plain", []byte("plain"))
	err = b.Put(ctx, "c/plain", []byte("cond"), objstore.IfAbsent())
	wantErr(t, "IfAbsent Put over a plain Put", err, objstore.ErrPreconditionFailed)
	mustGet(t, b, "c/plain", []byte("plain"))

	// A plain Put still overwrites, and a deleted key can be created again.
	mustPut(t, b, "c/new", []byte("three"))
	mustGet(t, b, "c/new", []byte("three"))
	if err := b.Delete(ctx, "c/new"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "c/new", []byte("four"), objstore.IfAbsent())
	mustGet(t, b, "c/new", []byte("four"))
}

func testIfAbsentRace(t *testing.T, b objstore.Bucket) {
	const racers = 16
	ctx := ctxFor(t)
	for round := range 3 {
		key := fmt.Sprintf("race/%d", round)
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				errs[i] = b.Put(ctx, key, fmt.Appendf(nil, "racer %d of round %d", i, round), objstore.IfAbsent())
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both won", round, winner, i)
				}
				winner = i
			case errors.Is(err, objstore.ErrPreconditionFailed):
			default:
				t.Fatalf("round %d: racer %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer won", round)
		}
		mustGet(t, b, key, fmt.Appendf(nil, "racer %d of round %d", winner, round))
	}
}

func testGetRange(t *testing.T, b objstore.Bucket) {
	body := make([]byte, 100)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	mustPut(t, b, "r", body)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name   string
		off, n int64
		lo, hi int   // want body[lo:hi]
		err    error // or this error
	}{
		{"middle", 10, 20, 10, 30, nil},
		{"head", 0, 1, 0, 1, nil},
		{"whole", 0, 100, 0, 100, nil},
		{"to end exactly", 90, 10, 90, 100, nil},
		{"n<0 from start", 0, -1, 0, 100, nil},
		{"n<0 from middle", 50, -1, 50, 100, nil},
		{"n<0 last byte", 99, -1, 99, 100, nil},
		{"past end is cut", 90, 50, 90, 100, nil},
		{"huge n is cut", 1, 1 << 62, 1, 100, nil},
		{"zero length", 10, 0, 10, 10, nil},
		{"zero length at end", 100, 0, 100, 100, nil},
		{"off == size", 100, 10, 100, 100, nil},
		{"off == size, n<0", 100, -1, 100, 100, nil},
		{"off beyond size", 101, 1, 0, 0, objstore.ErrInvalidRange},
		{"off beyond size, n<0", 150, -1, 0, 0, objstore.ErrInvalidRange},
		{"off beyond size, zero length", 101, 0, 0, 0, objstore.ErrInvalidRange},
		{"negative off", -1, 10, 0, 0, objstore.ErrInvalidRange},
	} {
		got, err := b.GetRange(ctx, "r", tc.off, tc.n)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: GetRange(%d, %d) = %s, %v; want error %v", tc.name, tc.off, tc.n, brief(got), err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: GetRange(%d, %d): %v", tc.name, tc.off, tc.n, err)
			continue
		}
		if want := body[tc.lo:tc.hi]; !bytes.Equal(got, want) {
			t.Errorf("%s: GetRange(%d, %d) = %s, want %s", tc.name, tc.off, tc.n, brief(got), brief(want))
		}
	}
	_, err := b.GetRange(ctx, "missing", 0, 10)
	wantErr(t, "GetRange of a missing key", err, objstore.ErrNotFound)
	_, err = b.GetRange(ctx, "missing", 0, 0)
	wantErr(t, "zero-length GetRange of a missing key", err, objstore.ErrNotFound)
}

func testGetRangeEmptyObject(t *testing.T, b objstore.Bucket) {
	mustPut(t, b, "empty", nil)
	ctx := ctxFor(t)
	for _, tc := range []struct{ off, n int64 }{{0, -1}, {0, 0}, {0, 1}, {0, 100}} {
		got, err := b.GetRange(ctx, "empty", tc.off, tc.n)
		if err != nil || len(got) != 0 {
			t.Errorf("GetRange(empty, %d, %d) = %s, %v; want empty", tc.off, tc.n, brief(got), err)
		}
	}
	for _, tc := range []struct{ off, n int64 }{{1, -1}, {1, 1}, {1, 0}} {
		_, err := b.GetRange(ctx, "empty", tc.off, tc.n)
		if !errors.Is(err, objstore.ErrInvalidRange) {
			t.Errorf("GetRange(empty, %d, %d): err = %v, want ErrInvalidRange", tc.off, tc.n, err)
		}
	}
}

func testStat(t *testing.T, b objstore.Bucket) {
	before := time.Now()
	mustPut(t, b, "s/obj", []byte("12345"))
	mustPut(t, b, "s/empty", nil)
	ctx := ctxFor(t)
	for key, size := range map[string]int64{"s/obj": 5, "s/empty": 0} {
		info, err := b.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		}
		if info.Key != key || info.Size != size {
			t.Errorf("Stat(%q) = %+v, want key %q size %d", key, info, key, size)
		}
		// Servers keep whole seconds and their own clock: allow slack, but not zero.
		if d := info.LastModified.Sub(before); d < -time.Hour || d > time.Hour {
			t.Errorf("Stat(%q).LastModified = %v, want near %v", key, info.LastModified, before)
		}
	}
	mustPut(t, b, "s/obj", []byte("1234567"))
	if info, err := b.Stat(ctx, "s/obj"); err != nil || info.Size != 7 {
		t.Errorf("Stat after overwrite = %+v, %v; want size 7", info, err)
	}
}

func testList(t *testing.T, b objstore.Bucket) {
	// Key order, not filesystem walk order: '.' (0x2e) < '/' (0x2f) < '0' (0x30).
	keys := []string{
		"a.b", "a/b", "a/c/d", "a/c/e", "a0", "a-", "ab", "b.x", "b/a.x", "b/a/x", "é", "z/z/z/z",
	}
	for i, k := range slices.Backward(keys) {
		mustPut(t, b, k, bytes.Repeat([]byte("x"), i))
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)

	all := listKeys(t, b, "")
	if got := keysOf(all); !slices.Equal(got, sorted) {
		t.Fatalf("List(\"\") = %q\nwant %q", got, sorted)
	}
	for _, info := range all {
		if want := int64(slices.Index(keys, info.Key)); info.Size != want {
			t.Errorf("List: %q has size %d, want %d", info.Key, info.Size, want)
		}
		if info.LastModified.IsZero() {
			t.Errorf("List: %q has no LastModified", info.Key)
		}
	}
	for prefix, want := range map[string][]string{
		"a":       {"a-", "a.b", "a/b", "a/c/d", "a/c/e", "a0", "ab"},
		"a/":      {"a/b", "a/c/d", "a/c/e"},
		"a/c":     {"a/c/d", "a/c/e"},
		"a/c/":    {"a/c/d", "a/c/e"},
		"a/c/d":   {"a/c/d"},
		"a/c/d/":  nil,
		"b/a":     {"b/a.x", "b/a/x"},
		"b/a/":    {"b/a/x"},
		"z/z/z/":  {"z/z/z/z"},
		"zz":      nil,
		"c/":      nil,
		"a//":     nil,
		"a/../b":  nil,
		"\u00e9":  {"é"},
		"a/c/d/e": nil,
	} {
		if got := keysOf(listKeys(t, b, prefix)); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}

	stop := errors.New("stop")
	var seen []string
	err := b.List(ctxFor(t), "", func(info objstore.ObjectInfo) error {
		seen = append(seen, info.Key)
		if len(seen) == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slices.Equal(seen, sorted[:3]) {
		t.Errorf("List stopped by its callback: err %v, seen %q; want %v, %q", err, seen, stop, sorted[:3])
	}
}

func testListPaging(t *testing.T, b objstore.Bucket) {
	const n = 1100 // more than one ListObjectsV2 page (1000)
	ctx := ctxFor(t)
	keys := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range keys {
				if err := b.Put(ctx, k, []byte(k)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("page/%04d", i)
	}
	for _, k := range want {
		keys <- k
	}
	close(keys)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Put: %v", err)
	}
	mustPut(t, b, "paging-sibling", []byte("x"))

	infos := listKeys(t, b, "page/")
	if got := keysOf(infos); !slices.Equal(got, want) {
		t.Fatalf("List(page/) = %d keys, want %d in order (first difference near %d)", len(got), n, firstDiff(got, want))
	}
	for _, info := range infos {
		if info.Size != int64(len(info.Key)) {
			t.Fatalf("List: %q has size %d, want %d", info.Key, info.Size, len(info.Key))
		}
	}
	if got := keysOf(listKeys(t, b, "page/05")); !slices.Equal(got, want[500:600]) {
		t.Errorf("List(page/05) = %d keys, want 100", len(got))
	}
	if got := len(listKeys(t, b, "")); got != n+1 {
		t.Errorf("List(\"\") = %d keys, want %d", got, n+1)
	}
}

// testObjectAndPrefix: S3 allows "a" and "a/b" at once (a filesystem has to work for it).
func testObjectAndPrefix(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	mustPut(t, b, "op/child", []byte("child"))
	mustPut(t, b, "op", []byte("parent"))
	mustPut(t, b, "op/child/grand", []byte("grand"))
	mustGet(t, b, "op", []byte("parent"))
	mustGet(t, b, "op/child", []byte("child"))
	mustGet(t, b, "op/child/grand", []byte("grand"))
	if got, want := keysOf(listKeys(t, b, "op")), []string{"op", "op/child", "op/child/grand"}; !slices.Equal(got, want) {
		t.Errorf("List(op) = %q, want %q", got, want)
	}
	if err := b.Delete(ctx, "op/child"); err != nil {
		t.Fatal(err)
	}
	mustGet(t, b, "op/child/grand", []byte("grand"))
	if err := b.Delete(ctx, "op/child/grand"); err != nil {
		t.Fatal(err)
	}
	mustGet(t, b, "op", []byte("parent"))
	if got, want := keysOf(listKeys(t, b, "op")), []string{"op"}; !slices.Equal(got, want) {
		t.Errorf("List(op) after deletes = %q, want %q", got, want)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testDelete(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	if err := b.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	mustPut(t, b, "d/x/1", []byte("1"))
	mustPut(t, b, "d/x/2", []byte("2"))
	if err := b.Delete(ctx, "d/x/1"); err != nil {
		t.Fatal(err)
	}
	_, err := b.Get(ctx, "d/x/1")
	wantErr(t, "Get after Delete", err, objstore.ErrNotFound)
	mustGet(t, b, "d/x/2", []byte("2"))
	if got := keysOf(listKeys(t, b, "d/")); !slices.Equal(got, []string{"d/x/2"}) {
		t.Errorf("List after Delete = %q", got)
	}
	if err := b.Delete(ctx, "d/x/1"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := b.Delete(ctx, "d/x/2"); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, b, ""); len(got) != 0 {
		t.Errorf("List after deleting all = %q", keysOf(got))
	}
	// The emptied prefix is usable again.
	mustPut(t, b, "d/x/3", []byte("3"))
	mustGet(t, b, "d/x/3", []byte("3"))
}

func testNotFound(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	mustPut(t, b, "nf/exists", []byte("x"))
	for _, key := range []string{"nf/missing", "nf", "nf/exists/below", "other"} {
		_, err := b.Get(ctx, key)
		wantErr(t, "Get("+key+")", err, objstore.ErrNotFound)
		_, err = b.GetRange(ctx, key, 0, 1)
		wantErr(t, "GetRange("+key+")", err, objstore.ErrNotFound)
		_, err = b.Stat(ctx, key)
		wantErr(t, "Stat("+key+")", err, objstore.ErrNotFound)
	}
}

func testInvalidKeys(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	for _, key := range []string{"", "/", "/a", "a/", "a//b", ".", "..", "./a", "a/./b", "a/..", "../a", "a/../b", "\xff", "a/\xc3"} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, objstore.ErrInvalidKey) {
				t.Errorf("%s(%q): err = %v, want ErrInvalidKey", op, key, err)
			}
		}
		check("Put", b.Put(ctx, key, []byte("x")))
		check("Put IfAbsent", b.Put(ctx, key, []byte("x"), objstore.IfAbsent()))
		_, err := b.Get(ctx, key)
		check("Get", err)
		_, err = b.GetRange(ctx, key, 0, 1)
		check("GetRange", err)
		_, err = b.Stat(ctx, key)
		check("Stat", err)
		check("Delete", b.Delete(ctx, key))
		check("CheckKey", objstore.CheckKey(key))
	}
	if got := listKeys(t, b, ""); len(got) != 0 {
		t.Errorf("invalid keys were stored: %q", keysOf(got))
	}
}

func testKeyCharacters(t *testing.T, b objstore.Bucket) {
	keys := []string{
		"sp ace/x y",
		"plus+sign",
		"percent%25%/%",
		"sub-delims!$&'()*,;=:@",
		"query?a=b#frag",
		"unicodé/日本語/ü",
		"dots.../..x/x..",
		"tilde~/back\\slash",
		"tmp/%tmp-123",
		"a%2Fb",
	}
	for _, k := range keys {
		if err := objstore.CheckKey(k); err != nil {
			t.Fatalf("CheckKey(%q): %v", k, err)
		}
		mustPut(t, b, k, []byte(k))
	}
	for _, k := range keys {
		mustGet(t, b, k, []byte(k))
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	if got := keysOf(listKeys(t, b, "")); !slices.Equal(got, sorted) {
		t.Errorf("List = %q\nwant %q", got, sorted)
	}
	if got := keysOf(listKeys(t, b, "percent%")); !slices.Equal(got, []string{"percent%25%/%"}) {
		t.Errorf("List(percent%%) = %q", got)
	}
}

// largeBody is 9 MiB of pseudo-random bytes, made once per test binary.
var largeBody = sync.OnceValue(func() []byte {
	body := make([]byte, 9<<20)
	rng := rand.NewPCG(1, 2)
	for i := 0; i < len(body); i += 8 {
		binary.LittleEndian.PutUint64(body[i:], rng.Uint64())
	}
	return body
})

func testLargeObject(t *testing.T, b objstore.Bucket) {
	body := largeBody()
	size := int64(len(body))
	mustPut(t, b, "large/obj", body)
	mustGet(t, b, "large/obj", body)
	ctx := ctxFor(t)
	got, err := b.GetRange(ctx, "large/obj", 8<<20+3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if want := body[8<<20+3:]; !bytes.Equal(got, want) {
		t.Errorf("GetRange(8MiB+3, 1MiB): got %d bytes, want the last %d", len(got), len(want))
	}
	got, err = b.GetRange(ctx, "large/obj", 1<<20, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body[1<<20:5<<20]) {
		t.Errorf("GetRange(1MiB, 4MiB): %d bytes, not the body's", len(got))
	}
	if info, err := b.Stat(ctx, "large/obj"); err != nil || info.Size != size {
		t.Errorf("Stat = %+v, %v; want size %d", info, err, size)
	}
}

// makeBody builds a body that names its key and version and checks itself, so that a
// reader can tell a torn or mixed-up read from a whole one.
func makeBody(key string, version, size int) []byte {
	head := fmt.Sprintf("%s|%d|%d|", key, version, size)
	body := make([]byte, max(size, len(head)))
	copy(body, head)
	for i := len(head); i < len(body); i++ {
		body[i] = byte(version*31 + i)
	}
	return body
}

func checkBody(key string, body []byte) error {
	parts := strings.SplitN(string(body[:min(len(body), 200)]), "|", 4)
	if len(parts) < 4 || parts[0] != key {
		return fmt.Errorf("body of %q has no header: %s", key, brief(body))
	}
	var version, size int
	if _, err := fmt.Sscanf(parts[1]+" "+parts[2], "%d %d", &version, &size); err != nil {
		return fmt.Errorf("body of %q: bad header: %v", key, err)
	}
	if want := makeBody(key, version, size); !bytes.Equal(body, want) {
		return fmt.Errorf("body of %q version %d: torn or corrupt (%d bytes, want %d)", key, version, len(body), len(want))
	}
	return nil
}

func testConcurrentReadersWriters(t *testing.T, b objstore.Bucket) {
	const (
		nkeys   = 4
		writers = 4
		readers = 4
		ops     = 15
	)
	ctx := ctxFor(t)
	keyName := func(i int) string { return fmt.Sprintf("conc/%d", i) }
	for i := range nkeys {
		mustPut(t, b, keyName(i), makeBody(keyName(i), 0, 100))
	}
	errs := make(chan error, writers+readers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for op := range ops {
				k := keyName(rng.IntN(nkeys))
				if err := b.Put(ctx, k, makeBody(k, w*ops+op+1, 1+rng.IntN(16<<10))); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for range ops {
				k := keyName(rng.IntN(nkeys))
				body, err := b.Get(ctx, k)
				if err == nil {
					err = checkBody(k, body)
				}
				if err == nil {
					var part []byte
					part, err = b.GetRange(ctx, k, 0, 40)
					if err == nil && !bytes.HasPrefix(part, []byte(k+"|")) {
						err = fmt.Errorf("GetRange(%q, 0, 40) = %s", k, brief(part))
					}
				}
				if err == nil {
					err = b.List(ctx, "conc/", func(objstore.ObjectInfo) error { return nil })
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(listKeys(t, b, "conc/")); got != nkeys {
		t.Errorf("List(conc/) = %d keys, want %d", got, nkeys)
	}
}

func testCanceledContext(t *testing.T, b objstore.Bucket) {
	mustPut(t, b, "ctx/k", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: err = %v, want context.Canceled", op, err)
		}
	}
	check("Put", b.Put(ctx, "ctx/new", []byte("x")))
	check("Put IfAbsent", b.Put(ctx, "ctx/new", []byte("x"), objstore.IfAbsent()))
	_, err := b.Get(ctx, "ctx/k")
	check("Get", err)
	_, err = b.GetRange(ctx, "ctx/k", 0, 1)
	check("GetRange", err)
	_, err = b.Stat(ctx, "ctx/k")
	check("Stat", err)
	check("List", b.List(ctx, "", func(objstore.ObjectInfo) error { return nil }))
	check("Delete", b.Delete(ctx, "ctx/k"))
	mustGet(t, b, "ctx/k", []byte("x"))
	if _, err := b.Stat(ctxFor(t), "ctx/new"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Put with a canceled context stored the object (Stat: %v)", err)
	}
}

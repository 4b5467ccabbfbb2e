// Package coordtest is the conformance suite every coord.Store implementation passes: the
// bbolt store, and the DynamoDB store against moto_server (and AWS, when pointed there).
// It covers the Store contract and the domain helpers built on it (Registry,
// Notifications, Work, WALWork, GCSchedule, Orphans), so each helper is proven on every store.
package coordtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
)

// NewStore returns a new, empty store for the (sub)test it is given, built with opts (the
// suite passes coord.WithClock for a fake clock). It is called once per subtest, from
// parallel subtests; the suite closes the store when the subtest ends.
type NewStore func(t *testing.T, opts ...coord.Option) coord.Store

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"PutGet", testPutGet},
		{"Invalid", testInvalid},
		{"IfAbsent", testIfAbsent},
		{"IfAbsentRace", testIfAbsentRace},
		{"IfVersion", testIfVersion},
		{"IfVersionRace", testIfVersionRace},
		{"Expiry", testExpiry},
		{"ExpiryBoundary", testExpiryBoundary},
		{"Query", testQuery},
		{"QueryPaging", testQueryPaging},
		{"Add", testAdd},
		{"AddOverflow", testAddOverflow},
		{"AddRace", testAddRace},
		{"Delete", testDelete},
		{"Closed", testClosed},
		{"CanceledContext", testCanceledContext},
		{"Registry", testRegistry},
		{"Notifications", testNotifications},
		{"NotificationsRace", testNotificationsRace},
		{"Work", testWork},
		{"GCSchedule", testGCSchedule},
		{"AddAll", testAddAll},
		{"AddAllRace", testAddAllRace},
		{"WALWork", testWALWork},
		{"Orphans", testOrphans},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, func(t *testing.T, opts ...coord.Option) coord.Store {
				s := newStore(t, opts...)
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				return s
			})
		})
	}
}

// Clock is a fake clock for coord.WithClock; it moves only when told. Safe for concurrent
// use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// epoch is where fake clocks start: a whole second plus 250 ms, to exercise rounding.
var epoch = time.Unix(1_900_000_000, 250_000_000)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s coord.Store, it coord.Item, cond coord.Condition) coord.Item {
	t.Helper()
	out, err := s.Put(ctxFor(t), it, cond)
	if err != nil {
		t.Fatalf("Put(%s/%s, %+v): %v", it.PK, it.SK, cond, err)
	}
	if out.Version == 0 {
		t.Fatalf("Put(%s/%s) returned version 0", it.PK, it.SK)
	}
	return out
}

func mustGet(t *testing.T, s coord.Store, pk, sk string) coord.Item {
	t.Helper()
	it, err := s.Get(ctxFor(t), pk, sk)
	if err != nil {
		t.Fatalf("Get(%s/%s): %v", pk, sk, err)
	}
	return it
}

func wantNotFound(t *testing.T, s coord.Store, pk, sk string) {
	t.Helper()
	it, err := s.Get(ctxFor(t), pk, sk)
	if !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("Get(%s/%s) = %+v, %v; want ErrNotFound", pk, sk, it, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// sameItem compares items, taking nil and empty maps as equal.
func sameItem(a, b coord.Item) bool {
	return a.PK == b.PK && a.SK == b.SK && a.Version == b.Version && a.ExpiresAt.Equal(b.ExpiresAt) &&
		maps.Equal(a.Attrs, b.Attrs) && maps.Equal(a.Counters, b.Counters)
}

func keys(items []coord.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.SK)
	}
	return out
}

func queryAll(t *testing.T, s coord.Store, pk, prefix string) []coord.Item {
	t.Helper()
	var out []coord.Item
	if err := s.Query(ctxFor(t), pk, prefix, func(it coord.Item) error {
		if it.PK != pk || !strings.HasPrefix(it.SK, prefix) {
			t.Errorf("Query(%s, %q) yielded %s/%s", pk, prefix, it.PK, it.SK)
		}
		out = append(out, it)
		return nil
	}); err != nil {
		t.Fatalf("Query(%s, %q): %v", pk, prefix, err)
	}
	return out
}

func testPutGet(t *testing.T, newStore NewStore) {
	s := newStore(t)
	in := coord.Item{
		PK: "p", SK: "s",
		Attrs:    map[string]string{"a": "1", "empty": "", "ünï": "çødé ✓", "spaced name": "x y"},
		Counters: map[string]int64{"c": -5, "max": math.MaxInt64, "min": math.MinInt64, "zero": 0},
	}
	out := mustPut(t, s, in, coord.Condition{})
	if out.PK != "p" || out.SK != "s" || !out.ExpiresAt.IsZero() ||
		!maps.Equal(out.Attrs, in.Attrs) || !maps.Equal(out.Counters, in.Counters) {
		t.Fatalf("Put returned %+v, want the item %+v", out, in)
	}
	got := mustGet(t, s, "p", "s")
	if !sameItem(got, out) {
		t.Fatalf("Get = %+v, want %+v", got, out)
	}
	if got.Attr("ünï") != "çødé ✓" || got.Attr("nope") != "" {
		t.Fatalf("Attr: %q %q", got.Attr("ünï"), got.Attr("nope"))
	}

	// Maps are copies: changing the caller's or the returned ones changes nothing stored.
	in.Attrs["a"] = "changed"
	out.Attrs["a"] = "changed"
	got.Counters["c"] = 99
	if again := mustGet(t, s, "p", "s"); again.Attrs["a"] != "1" || again.Counters["c"] != -5 {
		t.Fatalf("stored item changed through a map: %+v", again)
	}

	wantNotFound(t, s, "p", "other")
	wantNotFound(t, s, "other", "s")

	// Put replaces the whole item.
	out2 := mustPut(t, s, coord.Item{PK: "p", SK: "s", Attrs: map[string]string{"b": "2"}}, coord.Condition{})
	if out2.Version == out.Version {
		t.Fatalf("second Put kept version %d", out.Version)
	}
	got = mustGet(t, s, "p", "s")
	if !sameItem(got, out2) || len(got.Counters) != 0 || got.Attrs["a"] != "" {
		t.Fatalf("after replace Get = %+v, want %+v", got, out2)
	}
	// Item.Version given to Put is ignored.
	out3 := mustPut(t, s, coord.Item{PK: "p", SK: "s", Version: 42}, coord.Condition{})
	if out3.Version == 42 || out3.Version == out2.Version {
		t.Fatalf("Put with Item.Version 42 stored version %d", out3.Version)
	}
	if got := mustGet(t, s, "p", "s"); len(got.Attrs) != 0 || len(got.Counters) != 0 || got.Version != out3.Version {
		t.Fatalf("empty item Get = %+v", got)
	}

	// Keys at their size limits.
	long := coord.Item{PK: strings.Repeat("p", coord.MaxPKLen), SK: strings.Repeat("s", coord.MaxSKLen)}
	mustPut(t, s, long, coord.Condition{})
	mustGet(t, s, long.PK, long.SK)
}

func testInvalid(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	items := map[string]coord.Item{
		"empty pk":          {SK: "s"},
		"empty sk":          {PK: "p"},
		"long pk":           {PK: strings.Repeat("p", coord.MaxPKLen+1), SK: "s"},
		"long sk":           {PK: "p", SK: strings.Repeat("s", coord.MaxSKLen+1)},
		"non-UTF-8 pk":      {PK: "p\xff", SK: "s"},
		"non-UTF-8 sk":      {PK: "p", SK: "\xc3("},
		"empty attr name":   {PK: "p", SK: "s", Attrs: map[string]string{"": "v"}},
		"long attr name":    {PK: "p", SK: "s", Attrs: map[string]string{strings.Repeat("n", coord.MaxNameLen+1): "v"}},
		"non-UTF-8 value":   {PK: "p", SK: "s", Attrs: map[string]string{"a": "\xff\xfe"}},
		"empty counter":     {PK: "p", SK: "s", Counters: map[string]int64{"": 1}},
		"non-UTF-8 counter": {PK: "p", SK: "s", Counters: map[string]int64{"\x80": 1}},
	}
	for name, it := range items {
		_, err := s.Put(ctx, it, coord.Condition{})
		wantErr(t, "Put "+name, err, coord.ErrInvalid)
	}
	_, err := s.Put(ctx, coord.Item{PK: "p", SK: "s"}, coord.Condition{Absent: true, Version: 3})
	wantErr(t, "Put absent+version", err, coord.ErrInvalid)
	_, err = s.Get(ctx, "", "s")
	wantErr(t, "Get empty pk", err, coord.ErrInvalid)
	err = s.Delete(ctx, "p", "s", coord.IfAbsent)
	wantErr(t, "Delete if absent", err, coord.ErrInvalid)
	err = s.Delete(ctx, "p", "", coord.Condition{})
	wantErr(t, "Delete empty sk", err, coord.ErrInvalid)
	_, err = s.Add(ctx, "p", "s", "", 1)
	wantErr(t, "Add empty name", err, coord.ErrInvalid)
	_, err = s.Add(ctx, "p", "", "n", 1)
	wantErr(t, "Add empty sk", err, coord.ErrInvalid)
	err = s.Query(ctx, "", "", func(coord.Item) error { return nil })
	wantErr(t, "Query empty pk", err, coord.ErrInvalid)
	// Nothing was written by any of them.
	wantNotFound(t, s, "p", "s")
}

func testIfAbsent(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	first := mustPut(t, s, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"who": "first"}}, coord.IfAbsent)
	_, err := s.Put(ctx, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"who": "second"}}, coord.IfAbsent)
	wantErr(t, "second IfAbsent Put", err, coord.ErrConditionFailed)
	if got := mustGet(t, s, "p", "k"); !sameItem(got, first) {
		t.Fatalf("after failed Put: %+v, want %+v", got, first)
	}
	// Another sort key in the same partition is another item.
	mustPut(t, s, coord.Item{PK: "p", SK: "k2"}, coord.IfAbsent)
	if err := s.Delete(ctx, "p", "k", coord.Condition{}); err != nil {
		t.Fatal(err)
	}
	again := mustPut(t, s, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"who": "third"}}, coord.IfAbsent)
	if again.Version == first.Version {
		t.Fatalf("recreated item reuses version %d", first.Version)
	}
}

// racers is how many goroutines race for one condition.
const racers = 16

func testIfAbsentRace(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	for round := range 3 {
		key := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		outs := make([]coord.Item, racers)
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				outs[i], errs[i] = s.Put(ctx, coord.Item{PK: "p", SK: key, Attrs: map[string]string{"who": strconv.Itoa(i)}}, coord.IfAbsent)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, coord.ErrConditionFailed):
				t.Fatalf("round %d: racer %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer won", round)
		}
		if got := mustGet(t, s, "p", key); !sameItem(got, outs[winner]) {
			t.Fatalf("round %d: stored %+v, winner wrote %+v", round, got, outs[winner])
		}
	}
}

func testIfVersion(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	v1 := mustPut(t, s, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"n": "1"}}, coord.Condition{})
	v2 := mustPut(t, s, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"n": "2"}}, coord.IfVersion(v1.Version))
	if v2.Version == v1.Version {
		t.Fatalf("version unchanged by conditional Put: %d", v1.Version)
	}
	_, err := s.Put(ctx, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"n": "stale"}}, coord.IfVersion(v1.Version))
	wantErr(t, "Put with stale version", err, coord.ErrConditionFailed)
	_, err = s.Put(ctx, coord.Item{PK: "p", SK: "k"}, coord.IfVersion(v2.Version+1))
	wantErr(t, "Put with made-up version", err, coord.ErrConditionFailed)
	if got := mustGet(t, s, "p", "k"); !sameItem(got, v2) {
		t.Fatalf("after failed Puts: %+v, want %+v", got, v2)
	}
	_, err = s.Put(ctx, coord.Item{PK: "p", SK: "missing"}, coord.IfVersion(v2.Version))
	wantErr(t, "Put IfVersion on a missing item", err, coord.ErrConditionFailed)
	wantNotFound(t, s, "p", "missing")
	v3 := mustPut(t, s, coord.Item{PK: "p", SK: "k", Attrs: map[string]string{"n": "3"}}, coord.IfVersion(v2.Version))
	if got := mustGet(t, s, "p", "k"); got.Version != v3.Version || got.Attrs["n"] != "3" {
		t.Fatalf("Get = %+v, want version %d n=3", got, v3.Version)
	}
	// Versions never repeat, also not across a delete.
	if err := s.Delete(ctx, "p", "k", coord.Condition{}); err != nil {
		t.Fatal(err)
	}
	v4 := mustPut(t, s, coord.Item{PK: "p", SK: "k"}, coord.IfAbsent)
	for _, old := range []int64{v1.Version, v2.Version, v3.Version} {
		if v4.Version == old {
			t.Fatalf("version %d reused after delete", old)
		}
		_, err := s.Put(ctx, coord.Item{PK: "p", SK: "k"}, coord.IfVersion(old))
		wantErr(t, "Put with a version from before the delete", err, coord.ErrConditionFailed)
	}
}

// testIfVersionRace runs read-modify-write increments from several goroutines with
// IfVersion: optimistic concurrency must lose no increment.
func testIfVersionRace(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	const workers, each = 8, 4
	mustPut(t, s, coord.Item{PK: "p", SK: "n", Attrs: map[string]string{"n": "0"}}, coord.IfAbsent)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for done := 0; done < each; {
				it, err := s.Get(ctx, "p", "n")
				if err != nil {
					errc <- err
					return
				}
				n, _ := strconv.Atoi(it.Attrs["n"])
				it.Attrs["n"] = strconv.Itoa(n + 1)
				_, err = s.Put(ctx, it, coord.IfVersion(it.Version))
				switch {
				case err == nil:
					done++
				case !errors.Is(err, coord.ErrConditionFailed):
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "p", "n").Attrs["n"]; got != strconv.Itoa(workers*each) {
		t.Fatalf("counter = %s after %d increments", got, workers*each)
	}
}

func testExpiry(t *testing.T, newStore NewStore) {
	clk := NewClock(epoch)
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	if !s.Now().Equal(epoch) {
		t.Fatalf("Now = %v, want the fake clock's %v", s.Now(), epoch)
	}
	base := epoch.Truncate(time.Second) // epoch is base + 250 ms

	// ExpiresAt is rounded up to a whole second: base+1.75 s → base+2 s.
	out := mustPut(t, s, coord.Item{PK: "p", SK: "e", ExpiresAt: epoch.Add(1500 * time.Millisecond),
		Attrs: map[string]string{"a": "1"}}, coord.Condition{})
	if want := base.Add(2 * time.Second); !out.ExpiresAt.Equal(want) {
		t.Fatalf("Put returned ExpiresAt %v, want %v", out.ExpiresAt, want)
	}
	if got := mustGet(t, s, "p", "e"); !sameItem(got, out) {
		t.Fatalf("Get = %+v, want %+v", got, out)
	}
	mustPut(t, s, coord.Item{PK: "p", SK: "forever"}, coord.Condition{})
	mustPut(t, s, coord.Item{PK: "p", SK: "later", ExpiresAt: epoch.Add(time.Hour)}, coord.Condition{})

	clk.Advance(1500 * time.Millisecond) // base+1.75 s: still live
	mustGet(t, s, "p", "e")
	clk.Advance(250 * time.Millisecond) // base+2 s: expired
	wantNotFound(t, s, "p", "e")
	if got := keys(queryAll(t, s, "p", "")); !slices.Equal(got, []string{"forever", "later"}) {
		t.Fatalf("Query after expiry = %v", got)
	}
	_, err := s.Put(ctx, coord.Item{PK: "p", SK: "e"}, coord.IfVersion(out.Version))
	wantErr(t, "IfVersion on an expired item", err, coord.ErrConditionFailed)
	err = s.Delete(ctx, "p", "e", coord.IfVersion(out.Version))
	wantErr(t, "Delete IfVersion on an expired item", err, coord.ErrConditionFailed)

	// IfAbsent holds on an expired item, and the new item has a new version.
	re := mustPut(t, s, coord.Item{PK: "p", SK: "e", Attrs: map[string]string{"b": "2"}}, coord.IfAbsent)
	if re.Version == out.Version {
		t.Fatalf("recreated expired item kept version %d", out.Version)
	}
	if got := mustGet(t, s, "p", "e"); !sameItem(got, re) {
		t.Fatalf("recreated item Get = %+v, want %+v", got, re)
	}

	// Add starts an expired item afresh: no attributes, no old counters, no expiry.
	mustPut(t, s, coord.Item{PK: "p", SK: "c", ExpiresAt: clk.Now().Add(time.Second),
		Attrs: map[string]string{"a": "x"}, Counters: map[string]int64{"n": 100, "m": 5}}, coord.Condition{})
	clk.Advance(2 * time.Second)
	if n, err := s.Add(ctx, "p", "c", "n", 7); err != nil || n != 7 {
		t.Fatalf("Add on expired item = %d, %v; want 7", n, err)
	}
	got := mustGet(t, s, "p", "c")
	if len(got.Attrs) != 0 || !maps.Equal(got.Counters, map[string]int64{"n": 7}) || !got.ExpiresAt.IsZero() {
		t.Fatalf("Add on expired item left %+v", got)
	}

	// Add on a live item keeps its expiry and attributes.
	live := mustPut(t, s, coord.Item{PK: "p", SK: "live", ExpiresAt: clk.Now().Add(time.Minute),
		Attrs: map[string]string{"a": "y"}}, coord.Condition{})
	if n, err := s.Add(ctx, "p", "live", "n", 3); err != nil || n != 3 {
		t.Fatalf("Add on live item = %d, %v", n, err)
	}
	got = mustGet(t, s, "p", "live")
	if !got.ExpiresAt.Equal(live.ExpiresAt) || got.Attrs["a"] != "y" || got.Counters["n"] != 3 {
		t.Fatalf("Add on live expiring item left %+v (put %+v)", got, live)
	}
	clk.Advance(time.Minute)
	wantNotFound(t, s, "p", "live")

	// An ExpiresAt in the past stores an item nobody sees.
	mustPut(t, s, coord.Item{PK: "p", SK: "past", ExpiresAt: clk.Now().Add(-time.Hour)}, coord.Condition{})
	wantNotFound(t, s, "p", "past")
	mustPut(t, s, coord.Item{PK: "p", SK: "past"}, coord.IfAbsent)
}

// testExpiryBoundary: an item expiring at whole second T is live at T-1ns and expired at T.
func testExpiryBoundary(t *testing.T, newStore NewStore) {
	at := time.Unix(1_900_000_100, 0)
	clk := NewClock(at.Add(-time.Nanosecond))
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	out := mustPut(t, s, coord.Item{PK: "p", SK: "b", ExpiresAt: at}, coord.Condition{})
	if !out.ExpiresAt.Equal(at) {
		t.Fatalf("ExpiresAt %v, want %v unchanged", out.ExpiresAt, at)
	}
	mustGet(t, s, "p", "b")
	_, err := s.Put(ctx, coord.Item{PK: "p", SK: "b"}, coord.IfAbsent)
	wantErr(t, "IfAbsent just before expiry", err, coord.ErrConditionFailed)
	clk.Advance(time.Nanosecond)
	wantNotFound(t, s, "p", "b")
	mustPut(t, s, coord.Item{PK: "p", SK: "b"}, coord.IfAbsent)
}

func testQuery(t *testing.T, newStore NewStore) {
	clk := NewClock(epoch)
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	sks := []string{"a", "a/1", "a/2", "a/10", "ab", "b", "é", "z", "A", "a/", "a/2/x"}
	rand.Shuffle(len(sks), func(i, j int) { sks[i], sks[j] = sks[j], sks[i] })
	for _, sk := range sks {
		mustPut(t, s, coord.Item{PK: "q", SK: sk, Attrs: map[string]string{"sk": sk}}, coord.Condition{})
	}
	mustPut(t, s, coord.Item{PK: "q", SK: "a/3", ExpiresAt: epoch.Add(time.Second)}, coord.Condition{})
	mustPut(t, s, coord.Item{PK: "other", SK: "a/1"}, coord.Condition{})
	mustPut(t, s, coord.Item{PK: "q2", SK: "a/1"}, coord.Condition{})
	clk.Advance(5 * time.Second)

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		// Byte order: "A" < "a" < "a/" ... and "é" (0xC3 0xA9) after "z".
		{"", []string{"A", "a", "a/", "a/1", "a/10", "a/2", "a/2/x", "ab", "b", "z", "é"}},
		{"a/", []string{"a/", "a/1", "a/10", "a/2", "a/2/x"}},
		{"a/1", []string{"a/1", "a/10"}},
		{"a/2/x", []string{"a/2/x"}},
		{"é", []string{"é"}},
		{"nothing", nil},
	} {
		items := queryAll(t, s, "q", tc.prefix)
		if got := keys(items); !slices.Equal(got, tc.want) {
			t.Errorf("Query(q, %q) = %q, want %q", tc.prefix, got, tc.want)
		}
		for _, it := range items {
			if it.Attrs["sk"] != it.SK || it.Version == 0 {
				t.Errorf("Query(q, %q) item %+v", tc.prefix, it)
			}
		}
	}
	if got := queryAll(t, s, "missing", ""); len(got) != 0 {
		t.Fatalf("Query of a missing partition = %v", keys(got))
	}

	// An error from fn stops the query and comes back as is.
	stop := errors.New("stop here")
	calls := 0
	err := s.Query(ctx, "q", "", func(coord.Item) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Fatalf("Query with stopping fn: err %v after %d calls; want the fn's error after 2", err, calls)
	}

	// fn may write to the store.
	err = s.Query(ctx, "q", "a/", func(it coord.Item) error {
		_, err := s.Put(ctx, coord.Item{PK: "q", SK: "copy/" + it.SK}, coord.Condition{})
		if err == nil {
			_, err = s.Add(ctx, "q", it.SK, "seen", 1)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Query with writing fn: %v", err)
	}
	if got := keys(queryAll(t, s, "q", "copy/")); len(got) != 5 {
		t.Fatalf("copies written during Query: %v", got)
	}
}

func testQueryPaging(t *testing.T, newStore NewStore) {
	clk := NewClock(epoch)
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	const n = 250 // more than two pages of every implementation
	var want []string
	var wg sync.WaitGroup
	errc := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				it := coord.Item{PK: "pg", SK: fmt.Sprintf("k/%04d", i)}
				if i%10 == 3 {
					it.ExpiresAt = epoch.Add(time.Second)
				}
				if _, err := s.Put(ctx, it, coord.Condition{}); err != nil {
					errc <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
		if i%10 != 3 {
			want = append(want, fmt.Sprintf("k/%04d", i))
		}
	}
	close(work)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if got := keys(queryAll(t, s, "pg", "k/")); !slices.Equal(got, want) {
		t.Fatalf("paged Query returned %d keys, want %d in order\n got %v\nwant %v", len(got), len(want), got, want)
	}
	if got := keys(queryAll(t, s, "pg", "k/01")); len(got) != 90 {
		t.Fatalf("Query(k/01) returned %d keys, want 90", len(got))
	}
}

func testAdd(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	add := func(pk, sk, name string, delta, want int64) {
		t.Helper()
		got, err := s.Add(ctx, pk, sk, name, delta)
		if err != nil || got != want {
			t.Fatalf("Add(%s/%s %s %+d) = %d, %v; want %d", pk, sk, name, delta, got, err, want)
		}
	}
	add("w", "new", "n", 5, 5)
	first := mustGet(t, s, "w", "new")
	if !maps.Equal(first.Counters, map[string]int64{"n": 5}) || len(first.Attrs) != 0 || !first.ExpiresAt.IsZero() {
		t.Fatalf("Add created %+v", first)
	}
	add("w", "new", "n", -7, -2)
	add("w", "new", "m", 1, 1)
	got := mustGet(t, s, "w", "new")
	if !maps.Equal(got.Counters, map[string]int64{"n": -2, "m": 1}) {
		t.Fatalf("counters %v", got.Counters)
	}
	if got.Version == first.Version {
		t.Fatalf("Add kept version %d", got.Version)
	}
	_, err := s.Put(ctx, coord.Item{PK: "w", SK: "new"}, coord.IfVersion(first.Version))
	wantErr(t, "Put with the version from before Add", err, coord.ErrConditionFailed)
	add("w", "zero", "n", 0, 0)
	if got := mustGet(t, s, "w", "zero"); got.Counters["n"] != 0 || len(got.Counters) != 1 {
		t.Fatalf("Add 0 created %+v", got)
	}

	// Add keeps a Put item's attributes and other counters.
	mustPut(t, s, coord.Item{PK: "w", SK: "put", Attrs: map[string]string{"a": "1"}, Counters: map[string]int64{"n": 10, "o": 3}}, coord.Condition{})
	add("w", "put", "n", 5, 15)
	if got := mustGet(t, s, "w", "put"); got.Attrs["a"] != "1" || !maps.Equal(got.Counters, map[string]int64{"n": 15, "o": 3}) {
		t.Fatalf("after Add: %+v", got)
	}
	// Put replaces the counters again.
	mustPut(t, s, coord.Item{PK: "w", SK: "put"}, coord.Condition{})
	add("w", "put", "n", 1, 1)
}

func testAddOverflow(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	mustPut(t, s, coord.Item{PK: "o", SK: "x", Counters: map[string]int64{"hi": math.MaxInt64 - 1, "lo": math.MinInt64 + 1}}, coord.Condition{})
	if n, err := s.Add(ctx, "o", "x", "hi", 1); err != nil || n != math.MaxInt64 {
		t.Fatalf("Add to MaxInt64 = %d, %v", n, err)
	}
	_, err := s.Add(ctx, "o", "x", "hi", 1)
	wantErr(t, "Add past MaxInt64", err, coord.ErrInvalid)
	if n, err := s.Add(ctx, "o", "x", "lo", -1); err != nil || n != math.MinInt64 {
		t.Fatalf("Add to MinInt64 = %d, %v", n, err)
	}
	_, err = s.Add(ctx, "o", "x", "lo", -1)
	wantErr(t, "Add past MinInt64", err, coord.ErrInvalid)
	_, err = s.Add(ctx, "o", "x", "lo", math.MinInt64)
	wantErr(t, "Add MinInt64 to MinInt64", err, coord.ErrInvalid)
	got := mustGet(t, s, "o", "x")
	if got.Counters["hi"] != math.MaxInt64 || got.Counters["lo"] != math.MinInt64 {
		t.Fatalf("after failed Adds: %v", got.Counters)
	}
	if n, err := s.Add(ctx, "o", "x", "hi", math.MinInt64); err != nil || n != -1 {
		t.Fatalf("Add MinInt64 to MaxInt64 = %d, %v; want -1", n, err)
	}
}

// testAddRace: concurrent Adds of 1 must each see a distinct new value and lose none.
func testAddRace(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	const each = 10
	seen := make([][]int64, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			for range each {
				n, err := s.Add(ctx, "cnt", "x", "n", 1)
				if err != nil {
					errs[i] = err
					return
				}
				seen[i] = append(seen[i], n)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	all := slices.Sorted(slices.Values(slices.Concat(seen...)))
	for i, n := range all {
		if n != int64(i+1) {
			t.Fatalf("Add results are not 1..%d: position %d holds %d (%v)", racers*each, i, n, all)
		}
	}
	if got := mustGet(t, s, "cnt", "x").Counters["n"]; got != racers*each {
		t.Fatalf("counter = %d, want %d", got, racers*each)
	}
}

func testDelete(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	if err := s.Delete(ctx, "d", "missing", coord.Condition{}); err != nil {
		t.Fatalf("Delete of a missing item: %v", err)
	}
	err := s.Delete(ctx, "d", "missing", coord.IfVersion(7))
	wantErr(t, "Delete IfVersion of a missing item", err, coord.ErrConditionFailed)
	v := mustPut(t, s, coord.Item{PK: "d", SK: "k"}, coord.Condition{})
	mustPut(t, s, coord.Item{PK: "d", SK: "k2"}, coord.Condition{})
	err = s.Delete(ctx, "d", "k", coord.IfVersion(v.Version+1))
	wantErr(t, "Delete with a wrong version", err, coord.ErrConditionFailed)
	mustGet(t, s, "d", "k")
	if err := s.Delete(ctx, "d", "k", coord.IfVersion(v.Version)); err != nil {
		t.Fatalf("Delete with the right version: %v", err)
	}
	wantNotFound(t, s, "d", "k")
	mustGet(t, s, "d", "k2")
	if err := s.Delete(ctx, "d", "k2", coord.Condition{}); err != nil {
		t.Fatal(err)
	}
	if got := queryAll(t, s, "d", ""); len(got) != 0 {
		t.Fatalf("Query after deleting everything: %v", keys(got))
	}
	// A deleted item can be written again.
	mustPut(t, s, coord.Item{PK: "d", SK: "k"}, coord.IfAbsent)
}

func testClosed(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	mustPut(t, s, coord.Item{PK: "c", SK: "k"}, coord.Condition{})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.Get(ctx, "c", "k")
	wantErr(t, "Get after Close", err, coord.ErrClosed)
	_, err = s.Put(ctx, coord.Item{PK: "c", SK: "k"}, coord.Condition{})
	wantErr(t, "Put after Close", err, coord.ErrClosed)
	_, err = s.Add(ctx, "c", "k", "n", 1)
	wantErr(t, "Add after Close", err, coord.ErrClosed)
	err = s.Delete(ctx, "c", "k", coord.Condition{})
	wantErr(t, "Delete after Close", err, coord.ErrClosed)
	err = s.Query(ctx, "c", "", func(coord.Item) error { return nil })
	wantErr(t, "Query after Close", err, coord.ErrClosed)
}

func testCanceledContext(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Put(ctx, coord.Item{PK: "c", SK: "k"}, coord.Condition{})
	wantErr(t, "Put with canceled context", err, context.Canceled)
	_, err = s.Get(ctx, "c", "k")
	wantErr(t, "Get with canceled context", err, context.Canceled)
	_, err = s.Add(ctx, "c", "k", "n", 1)
	wantErr(t, "Add with canceled context", err, context.Canceled)
	err = s.Query(ctx, "c", "", func(coord.Item) error { return nil })
	wantErr(t, "Query with canceled context", err, context.Canceled)
	wantNotFound(t, s, "c", "k")
}

func testRegistry(t *testing.T, newStore NewStore) {
	clk := NewClock(epoch)
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	r := coord.Registry{Store: s}
	const ttl = 10 * time.Second
	nodes := []coord.Node{
		{ID: "a2", Zone: "us-east-1a", HTTPAddr: "10.0.0.2:8080", GRPCAddr: "10.0.0.2:9090", KafkaAddr: "10.0.0.2:9092",
			PeerAddr: "10.0.0.2:7001", JournalAddr: "10.0.0.2:7101"},
		{ID: "b1", Zone: "us-east-1b", HTTPAddr: "10.0.1.1:8080"},
		{ID: "a1", Zone: "us-east-1a", HTTPAddr: "10.0.0.1:8080"},
		{ID: "x", HTTPAddr: "10.0.2.1:8080"}, // zone unknown
	}
	for _, n := range nodes {
		if err := r.Heartbeat(ctx, n, ttl); err != nil {
			t.Fatalf("Heartbeat(%s): %v", n.ID, err)
		}
	}
	ids := func(zone string) []string {
		t.Helper()
		live, err := r.Live(ctx, zone)
		if err != nil {
			t.Fatalf("Live(%q): %v", zone, err)
		}
		var out []string
		for _, n := range live {
			out = append(out, n.ID)
		}
		return out
	}
	live, err := r.Live(ctx, "us-east-1a")
	if err != nil {
		t.Fatal(err)
	}
	want0 := nodes[0]
	want0.Seen = time.UnixMilli(epoch.UnixMilli())
	want0.ExpiresAt = epoch.Add(ttl).Truncate(time.Second).Add(time.Second) // rounded up
	if len(live) != 2 || live[0].ID != "a1" || !sameNode(live[1], want0) {
		t.Fatalf("Live(us-east-1a) = %+v, want a1 then %+v", live, want0)
	}
	for zone, want := range map[string][]string{
		"us-east-1a": {"a1", "a2"},
		"us-east-1b": {"b1"},
		"us-east-1c": {"a1", "a2", "b1", "x"}, // no node there: every live node
		"":           {"a1", "a2", "b1", "x"},
	} {
		if got := ids(zone); !slices.Equal(got, want) {
			t.Errorf("Live(%q) = %v, want %v", zone, got, want)
		}
	}

	// a1 keeps beating, the others stop.
	clk.Advance(6 * time.Second)
	if err := r.Heartbeat(ctx, nodes[2], ttl); err != nil {
		t.Fatal(err)
	}
	clk.Advance(6 * time.Second)
	if got := ids("us-east-1a"); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("Live(us-east-1a) after a2's TTL = %v", got)
	}
	if got := ids("us-east-1b"); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("Live(us-east-1b) after b1's TTL = %v, want the fallback [a1]", got)
	}
	// A node that comes back is live again.
	if err := r.Heartbeat(ctx, nodes[1], ttl); err != nil {
		t.Fatal(err)
	}
	if got := ids("us-east-1b"); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("Live(us-east-1b) after b1 returned = %v", got)
	}
	if err := r.Leave(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if got := ids("us-east-1a"); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("Live(us-east-1a) after a1 left = %v", got)
	}
	if err := r.Leave(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	if got := ids(""); len(got) != 0 {
		t.Fatalf("Live after everyone left = %v", got)
	}
	wantErr(t, "Heartbeat with ttl 0", r.Heartbeat(ctx, nodes[0], 0), coord.ErrInvalid)
	wantErr(t, "Heartbeat without ID", r.Heartbeat(ctx, coord.Node{Zone: "z"}, ttl), coord.ErrInvalid)
}

func sameNode(a, b coord.Node) bool {
	return a.ID == b.ID && a.Zone == b.Zone && a.HTTPAddr == b.HTTPAddr && a.GRPCAddr == b.GRPCAddr &&
		a.KafkaAddr == b.KafkaAddr && a.PeerAddr == b.PeerAddr && a.JournalAddr == b.JournalAddr && a.Seen.Equal(b.Seen) &&
		a.ExpiresAt.Equal(b.ExpiresAt)
}

func testNotifications(t *testing.T, newStore NewStore) {
	clk := NewClock(epoch)
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	n := coord.Notifications{Store: s, Keep: time.Hour}
	claim := func(key string, want bool) {
		t.Helper()
		first, err := n.Claim(ctx, key, 30*time.Second)
		if err != nil || first != want {
			t.Fatalf("Claim(%s) at +%v = %v, %v; want %v", key, clk.Now().Sub(epoch), first, err, want)
		}
	}
	handled := func(key string, want bool) {
		t.Helper()
		got, err := n.Handled(ctx, key)
		if err != nil || got != want {
			t.Fatalf("Handled(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	key := "bucket/wal/standard/n1/01J0000000000000000000000.wal@0065A1B2"
	claim(key, true)
	claim(key, false)
	handled(key, false)
	clk.Advance(29 * time.Second)
	claim(key, false)
	// The claimer died: its claim lapses after the TTL (30 s, +250 ms rounding up).
	clk.Advance(2 * time.Second)
	claim(key, true)
	claim(key, false)
	if err := n.Done(ctx, key); err != nil {
		t.Fatal(err)
	}
	handled(key, true)
	clk.Advance(time.Minute) // past the claim TTL: done still holds
	claim(key, false)
	if err := n.Release(ctx, key); err != nil { // a late Release does not undo Done
		t.Fatal(err)
	}
	claim(key, false)
	handled(key, true)
	clk.Advance(time.Hour) // past Keep: forgotten
	handled(key, false)
	claim(key, true)

	// Release lets the next delivery in at once.
	claim("r", true)
	if err := n.Release(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	claim("r", true)
	if err := n.Release(ctx, "never-claimed"); err != nil {
		t.Fatalf("Release of an unclaimed key: %v", err)
	}
	// Done without a claim (another handler finished the work) also counts.
	if err := n.Done(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	claim("d", false)
	// Done defaults to DefaultKeep.
	dflt := coord.Notifications{Store: s}
	if err := dflt.Done(ctx, "k7"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(coord.DefaultKeep - time.Minute)
	claim("k7", false)
	clk.Advance(2 * time.Minute)
	claim("k7", true)

	_, err := n.Claim(ctx, "z", 0)
	wantErr(t, "Claim with ttl 0", err, coord.ErrInvalid)
}

func testNotificationsRace(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	n := coord.Notifications{Store: s}
	var wg sync.WaitGroup
	firsts := make([]bool, racers)
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-start
			firsts[i], errs[i] = n.Claim(ctx, "dup", time.Minute)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if won := len(slices.DeleteFunc(firsts, func(b bool) bool { return !b })); won != 1 {
		t.Fatalf("%d of %d concurrent claims were first, want 1", won, racers)
	}
}

func testWork(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	w := coord.Work{Store: s}
	const stream = 42
	p := func(i int32) coord.Partition { return coord.Partition{StreamID: stream, Partition: i} }
	add := func(part coord.Partition, kind coord.WorkKind, n, want int64) {
		t.Helper()
		got, err := w.Add(ctx, part, kind, n)
		if err != nil || got != want {
			t.Fatalf("Add(%s %s %+d) = %d, %v; want %d", part, kind, n, got, err, want)
		}
	}
	pending := func(part coord.Partition, kind coord.WorkKind, want int64) {
		t.Helper()
		got, err := w.Pending(ctx, part, kind)
		if err != nil || got != want {
			t.Fatalf("Pending(%s %s) = %d, %v; want %d", part, kind, got, err, want)
		}
	}
	list := func(kind coord.WorkKind, min int64) string {
		t.Helper()
		var out []string
		err := w.List(ctx, stream, kind, min, func(part coord.Partition, n int64) error {
			if part.StreamID != stream {
				t.Errorf("List yielded stream %d", part.StreamID)
			}
			out = append(out, fmt.Sprintf("%d:%d", part.Partition, n))
			return nil
		})
		if err != nil {
			t.Fatalf("List(%s, %d): %v", kind, min, err)
		}
		return strings.Join(out, " ")
	}
	add(p(0), coord.WorkSegment, 100, 100)
	add(p(0), coord.WorkSegment, -40, 60)
	add(p(0), coord.WorkCompact, 7, 7)
	add(p(2), coord.WorkSegment, 500, 500)
	add(p(10), coord.WorkSegment, 1000, 1000)
	add(coord.Partition{StreamID: stream + 1, Partition: 1}, coord.WorkSegment, 5000, 5000)
	pending(p(0), coord.WorkSegment, 60)
	pending(p(0), coord.WorkCompact, 7)
	pending(p(2), coord.WorkCompact, 0)
	pending(p(5), coord.WorkSegment, 0)
	if got := list(coord.WorkSegment, 100); got != "2:500 10:1000" {
		t.Fatalf("List(segment, >=100) = %q", got)
	}
	if got := list(coord.WorkSegment, math.MinInt64); got != "0:60 2:500 10:1000" {
		t.Fatalf("List(segment, all) = %q", got)
	}
	if got := list(coord.WorkCompact, 1); got != "0:7" {
		t.Fatalf("List(compact, >=1) = %q", got)
	}
	// Set rebuilds one kind and leaves the other.
	if err := w.Set(ctx, p(0), coord.WorkSegment, 0); err != nil {
		t.Fatal(err)
	}
	pending(p(0), coord.WorkSegment, 0)
	pending(p(0), coord.WorkCompact, 7)
	if err := w.Set(ctx, p(7), coord.WorkCompact, 70); err != nil {
		t.Fatal(err)
	}
	pending(p(7), coord.WorkCompact, 70)

	// Concurrent adds and work done lose nothing.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			for range 5 {
				if _, err := w.Add(ctx, p(3), coord.WorkSegment, 10); err != nil {
					errs[i] = err
					return
				}
			}
			if _, err := w.Add(ctx, p(3), coord.WorkSegment, -20); err != nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	pending(p(3), coord.WorkSegment, 8*(50-20))

	_, err := w.Add(ctx, p(-1), coord.WorkSegment, 1)
	wantErr(t, "Add to partition -1", err, coord.ErrInvalid)
	_, err = w.Add(ctx, p(1), "", 1)
	wantErr(t, "Add of kind \"\"", err, coord.ErrInvalid)
}

func testGCSchedule(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	g := coord.GCSchedule{Store: s}
	t0 := time.UnixMilli(1_900_000_000_123)
	sched := func(key string, after time.Duration) coord.GCEntry {
		t.Helper()
		e, err := g.Schedule(ctx, key, t0.Add(after))
		if err != nil {
			t.Fatalf("Schedule(%s): %v", key, err)
		}
		return e
	}
	due := func(now time.Time) string {
		t.Helper()
		var out []string
		if err := g.Due(ctx, now, func(e coord.GCEntry) error {
			out = append(out, fmt.Sprintf("%s@%d", e.Key, e.After.Sub(t0).Milliseconds()))
			return nil
		}); err != nil {
			t.Fatalf("Due: %v", err)
		}
		return strings.Join(out, " ")
	}
	sched("wal/standard/n1/k3.wal", 3*time.Second)
	k1 := sched("wal/standard/n1/k1.wal", time.Second)
	sched("wal/standard/n1/k2.wal", 2*time.Second)
	sched("wal/standard/n1/k1b.wal", time.Second)
	sched("ns/7/segments/a/b/c.seg", 2*time.Second)
	sched("wal/standard/n1/k0.wal", 999*time.Millisecond+500*time.Microsecond) // ms precision: 999
	if !k1.After.Equal(t0.Add(time.Second)) || k1.Key != "wal/standard/n1/k1.wal" {
		t.Fatalf("Schedule returned %+v", k1)
	}

	if got := due(t0); got != "" {
		t.Fatalf("Due(t0) = %q", got)
	}
	if got, want := due(t0.Add(time.Second)), "wal/standard/n1/k0.wal@999 wal/standard/n1/k1.wal@1000 wal/standard/n1/k1b.wal@1000"; got != want {
		t.Fatalf("Due(t0+1s) = %q, want %q", got, want)
	}
	if got, want := due(t0.Add(2500*time.Millisecond)),
		"wal/standard/n1/k0.wal@999 wal/standard/n1/k1.wal@1000 wal/standard/n1/k1b.wal@1000 ns/7/segments/a/b/c.seg@2000 wal/standard/n1/k2.wal@2000"; got != want {
		t.Fatalf("Due(t0+2.5s) = %q, want %q", got, want)
	}
	if err := g.Remove(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(ctx, k1); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if got, want := due(t0.Add(time.Hour)),
		"wal/standard/n1/k0.wal@999 wal/standard/n1/k1b.wal@1000 ns/7/segments/a/b/c.seg@2000 wal/standard/n1/k2.wal@2000 wal/standard/n1/k3.wal@3000"; got != want {
		t.Fatalf("Due(t0+1h) after Remove = %q, want %q", got, want)
	}
	// Scheduling a key again adds a second entry.
	sched("wal/standard/n1/k3.wal", 500*time.Millisecond)
	if got, want := due(t0.Add(time.Second)), "wal/standard/n1/k3.wal@500 wal/standard/n1/k0.wal@999 wal/standard/n1/k1b.wal@1000"; got != want {
		t.Fatalf("Due after rescheduling = %q, want %q", got, want)
	}

	// An error from fn stops the listing.
	stop := errors.New("stop")
	calls := 0
	err := g.Due(ctx, t0.Add(time.Hour), func(coord.GCEntry) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Fatalf("Due with stopping fn = %v after %d calls", err, calls)
	}
	_, err = g.Schedule(ctx, "", t0)
	wantErr(t, "Schedule of an empty key", err, coord.ErrInvalid)
	_, err = g.Schedule(ctx, strings.Repeat("k", coord.MaxSKLen), t0)
	wantErr(t, "Schedule of a too long key", err, coord.ErrInvalid)
}

func testAddAll(t *testing.T, newStore NewStore) {
	clk := NewClock(time.Unix(1_900_000_000, 0))
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	addAll := func(sk string, deltas, want map[string]int64) {
		t.Helper()
		got, err := s.AddAll(ctx, "aa", sk, deltas)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("AddAll(%s %v) = %v, %v; want %v", sk, deltas, got, err, want)
		}
	}
	addAll("x", map[string]int64{"a": 5, "b": -3}, map[string]int64{"a": 5, "b": -3})
	first := mustGet(t, s, "aa", "x")
	if !maps.Equal(first.Counters, map[string]int64{"a": 5, "b": -3}) || len(first.Attrs) != 0 || !first.ExpiresAt.IsZero() {
		t.Fatalf("AddAll created %+v", first)
	}
	// It answers only the counters it added; the others stay.
	addAll("x", map[string]int64{"a": 1, "c": 7}, map[string]int64{"a": 6, "c": 7})
	got := mustGet(t, s, "aa", "x")
	if !maps.Equal(got.Counters, map[string]int64{"a": 6, "b": -3, "c": 7}) || got.Version == first.Version {
		t.Fatalf("after AddAll: %+v (first version %d)", got, first.Version)
	}
	// It keeps a live item's attributes and expiry, and starts an expired one afresh.
	exp := clk.Now().Add(time.Minute)
	mustPut(t, s, coord.Item{PK: "aa", SK: "e", ExpiresAt: exp, Attrs: map[string]string{"k": "v"}, Counters: map[string]int64{"a": 1, "z": 9}}, coord.Condition{})
	addAll("e", map[string]int64{"a": 1}, map[string]int64{"a": 2})
	if got := mustGet(t, s, "aa", "e"); got.Attr("k") != "v" || !got.ExpiresAt.Equal(exp) || !maps.Equal(got.Counters, map[string]int64{"a": 2, "z": 9}) {
		t.Fatalf("AddAll on a live item: %+v", got)
	}
	clk.Advance(2 * time.Minute)
	addAll("e", map[string]int64{"a": 1}, map[string]int64{"a": 1})
	if got := mustGet(t, s, "aa", "e"); len(got.Attrs) != 0 || !got.ExpiresAt.IsZero() || !maps.Equal(got.Counters, map[string]int64{"a": 1}) {
		t.Fatalf("AddAll on an expired item: %+v", got)
	}
	// Overflow of any counter fails the call and changes nothing.
	mustPut(t, s, coord.Item{PK: "aa", SK: "o", Counters: map[string]int64{"hi": math.MaxInt64, "n": 1}}, coord.Condition{})
	_, err := s.AddAll(ctx, "aa", "o", map[string]int64{"hi": 1, "n": 1})
	wantErr(t, "AddAll past MaxInt64", err, coord.ErrInvalid)
	if got := mustGet(t, s, "aa", "o"); !maps.Equal(got.Counters, map[string]int64{"hi": math.MaxInt64, "n": 1}) {
		t.Fatalf("after a failed AddAll: %v", got.Counters)
	}
	// Bad arguments.
	_, err = s.AddAll(ctx, "aa", "x", nil)
	wantErr(t, "AddAll of nothing", err, coord.ErrInvalid)
	_, err = s.AddAll(ctx, "aa", "x", map[string]int64{"": 1})
	wantErr(t, "AddAll with an empty name", err, coord.ErrInvalid)
	_, err = s.AddAll(ctx, "", "x", map[string]int64{"a": 1})
	wantErr(t, "AddAll with an empty pk", err, coord.ErrInvalid)
	big := map[string]int64{}
	for i := range coord.MaxAddAll + 1 {
		big[strconv.Itoa(i)] = 1
	}
	_, err = s.AddAll(ctx, "aa", "x", big)
	wantErr(t, "AddAll of too many counters", err, coord.ErrInvalid)
	delete(big, "0")
	want := maps.Clone(big)
	addAll("big", big, want)
}

// testAddAllRace: concurrent AddAlls lose no delta.
func testAddAllRace(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := s.AddAll(ctx, "race", "x", map[string]int64{"all": 1, fmt.Sprint("w", w): 2}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustGet(t, s, "race", "x")
	if got.Counters["all"] != workers*each {
		t.Fatalf("all = %d, want %d", got.Counters["all"], workers*each)
	}
	for w := range workers {
		if n := got.Counters[fmt.Sprint("w", w)]; n != 2*each {
			t.Fatalf("w%d = %d, want %d", w, n, 2*each)
		}
	}
}

func testWALWork(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := ctxFor(t)
	w := coord.WALWork{Store: s}
	p0, p1, q := coord.Partition{StreamID: 1, Partition: 0}, coord.Partition{StreamID: 1, Partition: 1}, coord.Partition{StreamID: 2, Partition: 0}
	got, err := w.Add(ctx, "n1", map[coord.Partition]int64{p0: 100, p1: 50, q: 7})
	if err != nil || !maps.Equal(got, map[coord.Partition]int64{p0: 100, p1: 50, q: 7}) {
		t.Fatalf("Add n1 = %v, %v", got, err)
	}
	if got, err = w.Add(ctx, "n2", map[coord.Partition]int64{p0: 30}); err != nil || got[p0] != 30 {
		t.Fatalf("Add n2 = %v, %v", got, err)
	}
	if got, err = w.Add(ctx, "n1", map[coord.Partition]int64{p0: 1}); err != nil || !maps.Equal(got, map[coord.Partition]int64{p0: 101}) {
		t.Fatalf("Add n1 again = %v, %v", got, err)
	}
	if n, err := w.Pending(ctx, p0); err != nil || n != 131 {
		t.Fatalf("Pending p0 = %d, %v; want 131 (over both nodes)", n, err)
	}
	// Work done: subtracted per node; Compact drops what reached zero.
	if _, err := w.Add(ctx, "n1", map[coord.Partition]int64{p0: -101, q: -8}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Add(ctx, "n2", map[coord.Partition]int64{p0: -30}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "never"} {
		if err := w.Compact(ctx, n); err != nil {
			t.Fatalf("Compact %s: %v", n, err)
		}
	}
	nodes := map[string]map[coord.Partition]int64{}
	if err := w.Nodes(ctx, func(n string, m map[coord.Partition]int64) error { nodes[n] = m; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || !maps.Equal(nodes["n1"], map[coord.Partition]int64{p1: 50}) {
		t.Fatalf("after work done and Compact: %v", nodes)
	}
	// More partitions than one AddAll takes are split over several.
	many := map[coord.Partition]int64{}
	for i := range int32(coord.MaxAddAll*2 + 3) {
		many[coord.Partition{StreamID: 9, Partition: i}] = int64(i) + 1
	}
	if got, err := w.Add(ctx, "n3", many); err != nil || !maps.Equal(got, many) {
		t.Fatalf("Add of %d partitions: %d answered, %v", len(many), len(got), err)
	}
	if n, err := w.Pending(ctx, coord.Partition{StreamID: 9, Partition: coord.MaxAddAll * 2}); err != nil || n != coord.MaxAddAll*2+1 {
		t.Fatalf("Pending = %d, %v", n, err)
	}
	// Bad input.
	_, err = w.Add(ctx, "", map[coord.Partition]int64{p0: 1})
	wantErr(t, "Add for an empty node", err, coord.ErrInvalid)
	_, err = w.Add(ctx, "n1", map[coord.Partition]int64{{StreamID: 1, Partition: -1}: 1})
	wantErr(t, "Add of a negative partition", err, coord.ErrInvalid)
	mustPut(t, s, coord.Item{PK: "walwork", SK: "bad", Counters: map[string]int64{"x": 1}}, coord.Condition{})
	err = w.Nodes(ctx, func(string, map[coord.Partition]int64) error { return nil })
	wantErr(t, "Nodes over a bad counter name", err, coord.ErrCorrupt)
}

func testOrphans(t *testing.T, newStore NewStore) {
	clk := NewClock(time.Unix(1_900_000_000, 0))
	s := newStore(t, coord.WithClock(clk.Now))
	ctx := ctxFor(t)
	o := coord.Orphans{Store: s}
	t0 := clk.Now()
	r, err := o.Record(ctx, "wal/a.wal", t0, time.Hour)
	if err != nil || r.Key != "wal/a.wal" || !r.FirstSeen.Equal(t0) || !r.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Record = %+v, %v", r, err)
	}
	// A second Record keeps the first sighting.
	clk.Advance(time.Minute)
	if r, err := o.Record(ctx, "wal/a.wal", clk.Now(), time.Hour); err != nil || !r.FirstSeen.Equal(t0) {
		t.Fatalf("Record again = %+v, %v; want first seen %v", r, err, t0)
	}
	if _, err := o.Record(ctx, "seg/b.seg", clk.Now(), 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		t.Helper()
		var out []string
		if err := o.List(ctx, func(r coord.Orphan) error {
			out = append(out, r.Key+"@"+strconv.FormatInt(r.FirstSeen.Sub(t0).Milliseconds(), 10))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := list(); !slices.Equal(got, []string{"seg/b.seg@60000", "wal/a.wal@0"}) {
		t.Fatalf("List = %v", got)
	}
	// Forget, and forgetting a missing record.
	if err := o.Forget(ctx, "seg/b.seg"); err != nil {
		t.Fatal(err)
	}
	if err := o.Forget(ctx, "seg/none.seg"); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Equal(got, []string{"wal/a.wal@0"}) {
		t.Fatalf("List after Forget = %v", got)
	}
	// An expired record is gone: a new sighting starts a new clock.
	clk.Advance(time.Hour)
	if got := list(); len(got) != 0 {
		t.Fatalf("List after expiry = %v", got)
	}
	if r, err := o.Record(ctx, "wal/a.wal", clk.Now(), time.Hour); err != nil || !r.FirstSeen.Equal(clk.Now()) {
		t.Fatalf("Record after expiry = %+v, %v", r, err)
	}
	_, err = o.Record(ctx, "wal/c.wal", clk.Now(), 0)
	wantErr(t, "Record without a ttl", err, coord.ErrInvalid)
	_, err = o.Record(ctx, "", clk.Now(), time.Hour)
	wantErr(t, "Record of an empty key", err, coord.ErrInvalid)

	// The sweep clock: one claim per interval, whoever asks.
	if last, err := o.LastSweep(ctx); err != nil || !last.IsZero() {
		t.Fatalf("LastSweep before any = %v, %v", last, err)
	}
	now := clk.Now()
	if ok, err := o.ClaimSweep(ctx, now, time.Hour); err != nil || !ok {
		t.Fatalf("first ClaimSweep = %v, %v", ok, err)
	}
	if ok, err := o.ClaimSweep(ctx, now.Add(59*time.Minute), time.Hour); err != nil || ok {
		t.Fatalf("ClaimSweep within the interval = %v, %v", ok, err)
	}
	if last, err := o.LastSweep(ctx); err != nil || !last.Equal(now) {
		t.Fatalf("LastSweep = %v, %v; want %v", last, err, now)
	}
	var wg sync.WaitGroup
	var won sync.Map
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := o.ClaimSweep(ctx, now.Add(time.Hour), time.Hour)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Store(i, true)
			}
		}()
	}
	wg.Wait()
	n := 0
	won.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d of 4 concurrent ClaimSweeps won, want 1", n)
	}
}

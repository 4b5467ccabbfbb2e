package objstore_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/shared/objstore"
)

func mustProfile(t *testing.T, js string) *objstore.FaultProfile {
	t.Helper()
	p, err := objstore.ParseFaultProfile([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The example profile parses, and so does every fault on the ops it applies to.
func TestFaultProfileParses(t *testing.T) {
	p := mustProfile(t, `{"rules": [{"op": "put", "fault": "slowdown", "p": 0.2}, {"op": "put", "fault":
   "lost_answer", "p": 0.1}, {"op": "get", "fault": "timeout", "p": 0.05}, {"op": "get",
   "fault": "latency", "ms": 50}]}`)
	if len(p.Rules) != 4 || *p.Rules[0].P != 0.2 || p.Rules[3].P != nil || p.Rules[3].MS != 50 {
		t.Fatalf("parsed %+v", p)
	}
	mustProfile(t, `{"seed": 3, "rules": [
	  {"op": "*", "fault": "internal_error", "after_ms": 10, "for_ms": 5, "every_ms": 20, "max": 3, "prefix": "wal/"},
	  {"op": "delete", "fault": "lost_answer"}, {"op": "get", "fault": "short_read"},
	  {"op": "list", "fault": "reset"}, {"op": "stat", "fault": "timeout", "ms": 5},
	  {"op": "*", "fault": "latency", "jitter_ms": 5}]}`)
	mustProfile(t, `{"rules": []}`)
}

func TestFaultProfileRejects(t *testing.T) {
	for _, tc := range []struct{ js, want string }{
		{`{"rules": [{"op": "gett", "fault": "slowdown"}]}`, `rule 0 (gett slowdown): unknown op "gett": want one of put, get, stat, list, delete or *`},
		{`{"rules": [{"op": "put", "fault": "boom"}]}`, `unknown fault "boom": want one of slowdown, internal_error, timeout, latency, reset, lost_answer, short_read`},
		{`{"rules": [{"op": "put", "fault": "slowdown", "prob": 1}]}`, `unknown field "prob"`},
		{`{"rulez": []}`, `unknown field "rulez"`},
		{`{}`, `no "rules"`},
		{`{"rules": []} {}`, `data after the JSON object`},
		{`{"rules": [{"op": "get", "fault": "lost_answer"}]}`, `fault lost_answer applies to op put and delete only, not "get"`},
		{`{"rules": [{"op": "put", "fault": "short_read"}]}`, `fault short_read applies to op get only, not "put"`},
		{`{"rules": [{"op": "put", "fault": "slowdown", "p": 1.5}]}`, `p 1.5: want a probability from 0 to 1`},
		{`{"rules": [{"op": "put", "fault": "slowdown", "p": -0.1}]}`, `p -0.1`},
		{`{"rules": [{"op": "get", "fault": "latency"}]}`, `latency needs ms`},
		{`{"rules": [{"op": "get", "fault": "slowdown", "ms": 5}]}`, `ms and jitter_ms apply to latency and timeout only, not slowdown`},
		{`{"rules": [{"op": "get", "fault": "latency", "ms": -1}]}`, `ms -1: want 0 to`},
		{`{"rules": [{"op": "get", "fault": "reset", "every_ms": 10}]}`, `every_ms 10 needs for_ms above 0 and below it`},
		{`{"rules": [{"op": "get", "fault": "reset", "max": -2}]}`, `max -2`},
		{`{"rules": [{"op": "get", "fault": "timeout", "jitter_ms": 2}]}`, `jitter_ms applies to latency only`},
		{`{"rules": [{"op": 1, "fault": "reset"}]}`, `fault profile: json: cannot unmarshal number`},
		{`not json`, `fault profile: invalid character`},
	} {
		_, err := objstore.ParseFaultProfile([]byte(tc.js))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.js, err, tc.want)
		}
	}
	rules := strings.Repeat(`{"op": "put", "fault": "reset"},`, objstore.MaxFaultRules+1)
	if _, err := objstore.ParseFaultProfile([]byte(`{"rules": [` + strings.TrimSuffix(rules, ",") + `]}`)); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 rules: %v", err)
	}
}

func TestLoadFaultProfileNamesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.json")
	os.WriteFile(file, []byte(`{"rules": [{"op": "put", "fault": "nope"}]}`), 0o644)
	if _, err := objstore.LoadFaultProfile(file); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := objstore.LoadFaultProfile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// Each fault that stops a call fails it with its error and never reaches the bucket.
func TestFaultsThatFailCalls(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fault string
		is    error
		text  string
	}{
		{objstore.FaultSlowdown, objstore.ErrFaultInjected, "503 SlowDown"},
		{objstore.FaultInternalError, objstore.ErrFaultInjected, "500 InternalError"},
		{objstore.FaultReset, syscall.ECONNRESET, "connection reset by peer"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			mem := objstore.NewMem()
			mem.Put(ctx, "k", []byte("old"))
			f := objstore.WithFaults(mem, mustProfile(t, `{"rules": [{"op": "*", "fault": "`+tc.fault+`"}]}`))
			err := f.Put(ctx, "k", []byte("new"))
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "put k") {
				t.Fatalf("put: %v", err)
			}
			if got, _ := mem.Get(ctx, "k"); string(got) != "old" {
				t.Fatalf("the failed put reached the bucket: %q", got)
			}
			if _, err := f.Get(ctx, "k"); !errors.Is(err, tc.is) {
				t.Fatalf("get: %v", err)
			}
			if _, err := f.GetRange(ctx, "k", 0, 1); !errors.Is(err, tc.is) {
				t.Fatalf("get range: %v", err)
			}
			if _, err := f.Stat(ctx, "k"); !errors.Is(err, tc.is) {
				t.Fatalf("stat: %v", err)
			}
			if err := f.List(ctx, "", func(objstore.ObjectInfo) error { t.Fatal("listed"); return nil }); !errors.Is(err, tc.is) {
				t.Fatalf("list: %v", err)
			}
			if err := f.Delete(ctx, "k"); !errors.Is(err, tc.is) {
				t.Fatalf("delete: %v", err)
			}
			if _, err := mem.Stat(ctx, "k"); err != nil {
				t.Fatalf("the failed delete reached the bucket: %v", err)
			}
			if n := f.Count("*", tc.fault); n != 6 {
				t.Fatalf("count %d, want 6 (%v)", n, f.Counts())
			}
			if f.Count("get", tc.fault) != 2 || f.Calls("get") != 2 {
				t.Fatalf("get count %d, calls %d", f.Count("get", tc.fault), f.Calls("get"))
			}
		})
	}
}

func TestFaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := objstore.NewMem()
		f := objstore.WithFaults(mem, mustProfile(t, `{"rules": [{"op": "put", "fault": "timeout", "ms": 3000}, {"op": "get", "fault": "timeout"}]}`))
		start := time.Now()
		err := f.Put(ctx, "k", []byte("v"))
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, objstore.ErrFaultInjected) || time.Since(start) != 3*time.Second {
			t.Fatalf("put: %v after %v", err, time.Since(start))
		}
		if _, err := mem.Stat(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("a timed-out put reached the bucket: %v", err)
		}
		// Default hold, cut short by the caller's deadline.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start = time.Now()
		_, err = f.Get(cctx, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, objstore.ErrFaultInjected) || time.Since(start) != time.Second {
			t.Fatalf("get: %v after %v", err, time.Since(start))
		}
		start = time.Now()
		_, err = f.Get(ctx, "k")
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != objstore.DefaultFaultTimeout {
			t.Fatalf("get: %v after %v", err, time.Since(start))
		}
	})
}

func TestFaultLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := objstore.WithFaults(objstore.NewMem(), mustProfile(t, `{"rules": [
		  {"op": "get", "fault": "latency", "ms": 50}, {"op": "*", "fault": "latency", "ms": 20},
		  {"op": "stat", "fault": "latency", "ms": 10, "jitter_ms": 30}]}`))
		start := time.Now()
		if err := f.Put(ctx, "k", []byte("v")); err != nil || time.Since(start) != 20*time.Millisecond {
			t.Fatalf("put: %v after %v", err, time.Since(start))
		}
		start = time.Now()
		if b, err := f.Get(ctx, "k"); err != nil || string(b) != "v" || time.Since(start) != 70*time.Millisecond {
			t.Fatalf("get: %q %v after %v (latency rules add up)", b, err, time.Since(start))
		}
		for range 20 {
			start = time.Now()
			if _, err := f.Stat(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 30*time.Millisecond || d > 60*time.Millisecond {
				t.Fatalf("stat took %v, want 30 to 60 ms", d)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		if _, err := f.Get(cctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("get past its deadline: %v", err)
		}
		if n := f.Count("get", "latency"); n != 2*2 {
			t.Fatalf("get latency count %d, want 4", n)
		}
	})
}

func TestFaultLostAnswer(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	f := objstore.WithFaults(mem, mustProfile(t, `{"rules": [{"op": "put", "fault": "lost_answer", "max": 1}, {"op": "delete", "fault": "lost_answer"}]}`))
	err := f.Put(ctx, "k", []byte("v"), objstore.IfAbsent())
	if !errors.Is(err, objstore.ErrFaultInjected) || !strings.Contains(err.Error(), "answer was lost") {
		t.Fatalf("put: %v", err)
	}
	if got, err := mem.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("the put did not land: %q %v", got, err)
	}
	// The rule is spent (max 1): the retry meets the object it wrote.
	if err := f.Put(ctx, "k", []byte("v"), objstore.IfAbsent()); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("retry: %v", err)
	}
	// An error of the bucket itself is passed on as is.
	if err := f.Put(ctx, "bad//key", nil); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Fatalf("invalid key: %v", err)
	}
	if err := f.Delete(ctx, "k"); !errors.Is(err, objstore.ErrFaultInjected) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := mem.Stat(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the delete did not take effect: %v", err)
	}
	if f.Count("put", "lost_answer") != 1 || f.Count("delete", "lost_answer") != 1 {
		t.Fatalf("counts %v", f.Counts())
	}
}

func TestFaultShortRead(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	body := []byte(strings.Repeat("0123456789", 10))
	mem.Put(ctx, "k", body)
	mem.Put(ctx, "empty", nil)
	f := objstore.WithFaults(mem, mustProfile(t, `{"seed": 1, "rules": [{"op": "get", "fault": "short_read"}]}`))
	for range 50 {
		got, err := f.Get(ctx, "k")
		if err != nil || len(got) >= len(body) || string(got) != string(body[:len(got)]) {
			t.Fatalf("get: %d bytes, %v: want a shorter prefix", len(got), err)
		}
		got, err = f.GetRange(ctx, "k", 10, 20)
		if err != nil || len(got) >= 20 || string(got) != string(body[10:10+len(got)]) {
			t.Fatalf("get range: %q, %v", got, err)
		}
	}
	if got, err := f.Get(ctx, "empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty: %q %v", got, err)
	}
	if _, err := f.Get(ctx, "missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if n := f.Count("get", "short_read"); n != 102 { // the empty and the missing object count: the rule fired
		t.Fatalf("count %d", n)
	}
}

// p, prefix, max and the schedule decide which calls are hit; draws are reproducible from
// the seed.
func TestFaultSelection(t *testing.T) {
	ctx := context.Background()
	run := func() []bool {
		f := objstore.WithFaults(objstore.NewMem(), mustProfile(t, `{"seed": 9, "rules": [{"op": "put", "fault": "reset", "p": 0.3}]}`))
		var hits []bool
		for range 1000 {
			hits = append(hits, f.Put(ctx, "k", nil) != nil)
		}
		return hits
	}
	a, b := run(), run()
	n := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed drew differently")
		}
		if a[i] {
			n++
		}
	}
	if n < 230 || n > 370 {
		t.Fatalf("p 0.3 hit %d of 1000", n)
	}

	f := objstore.WithFaults(objstore.NewMem(), mustProfile(t, `{"rules": [{"op": "*", "fault": "reset", "prefix": "wal/", "max": 2}, {"op": "put", "fault": "slowdown", "p": 0}]}`))
	if err := f.Put(ctx, "seg/a", nil); err != nil {
		t.Fatalf("outside the prefix: %v", err)
	}
	for i := range 4 {
		err := f.Put(ctx, "wal/a", nil)
		if (i < 2) != errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("put %d: %v (max 2)", i, err)
		}
	}
	if f.Count("put", "slowdown") != 0 {
		t.Fatal("p 0 fired")
	}

	synctest.Test(t, func(t *testing.T) {
		f := objstore.WithFaults(objstore.NewMem(), mustProfile(t, `{"rules": [{"op": "stat", "fault": "reset", "after_ms": 100, "for_ms": 50, "every_ms": 200},
		  {"op": "list", "fault": "reset", "after_ms": 100, "for_ms": 50}]}`))
		hit := func(op string) bool {
			if op == "stat" {
				_, err := f.Stat(ctx, "k")
				return errors.Is(err, syscall.ECONNRESET)
			}
			return f.List(ctx, "", func(objstore.ObjectInfo) error { return nil }) != nil
		}
		start := time.Now()
		for _, step := range []struct {
			at         time.Duration
			stat, list bool
		}{{0, false, false}, {99, false, false}, {100, true, true}, {149, true, true}, {150, false, false},
			{299, false, false}, {300, true, false}, {349, true, false}, {350, false, false}, {500, true, false}} {
			time.Sleep(step.at*time.Millisecond - time.Since(start))
			if hit("stat") != step.stat || hit("list") != step.list {
				t.Fatalf("at %d ms: want stat %v list %v", step.at, step.stat, step.list)
			}
		}
	})
}

func TestFaultSetProfileAndMetrics(t *testing.T) {
	ctx := context.Background()
	f := objstore.WithFaults(objstore.NewMem(), nil)
	if err := f.Put(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	f.SetProfile(mustProfile(t, `{"rules": [{"op": "put", "fault": "slowdown"}]}`))
	if err := f.Put(ctx, "k", nil); !errors.Is(err, objstore.ErrFaultInjected) {
		t.Fatal(err)
	}
	f.SetProfile(nil)
	if err := f.Put(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.Counts(); len(got) != 1 || got[0] != (objstore.FaultCount{Op: "put", Fault: "slowdown", N: 1}) {
		t.Fatalf("counts %v", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(f)
	if v, n := gathered(t, reg, "loam_objstore_faults_injected_total", "put", "slowdown"); v != 1 || n != 5*5+2+1 {
		t.Fatalf("metric %v, %d series (want every op's faults)", v, n)
	}
	if v, _ := gathered(t, reg, "loam_objstore_fault_calls_total", "put", ""); v != 3 {
		t.Fatalf("put calls %v", v)
	}
}

// gathered is the value of the series of name with labels op and fault ("": none) and
// how many series name has.
func gathered(t *testing.T, reg *prometheus.Registry, name, op, fault string) (float64, int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n++
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["op"] == op && l["fault"] == fault {
				v = m.GetCounter().GetValue()
			}
		}
	}
	return v, n
}

func TestWatchFaultProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.json")
	first := []byte(`{"rules": []}`)
	os.WriteFile(file, first, 0o644)
	f := objstore.WithFaults(objstore.NewMem(), mustProfile(t, string(first)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		objstore.WatchFaultProfile(ctx, f, file, first, 5*time.Millisecond, discardLogger())
		close(done)
	}()
	defer func() { cancel(); <-done }()
	wait := func(rules int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(f.Profile().Rules) != rules; {
			if time.Now().After(deadline) {
				t.Fatalf("profile has %d rules, want %d", len(f.Profile().Rules), rules)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	os.WriteFile(file, []byte(`{"rules": [{"op": "put", "fault": "reset"}]}`), 0o644)
	wait(1)
	os.WriteFile(file, []byte(`{"rules": [{"op": "put", "fault": "bogus"}]}`), 0o644)
	time.Sleep(50 * time.Millisecond)
	wait(1) // a bad file keeps the profile in force
	os.WriteFile(file, []byte(`{"rules": []}`), 0o644)
	wait(0)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func FuzzParseFaultProfile(f *testing.F) {
	for _, s := range []string{
		`{"rules": [{"op": "put", "fault": "slowdown", "p": 0.2}, {"op": "put", "fault": "lost_answer", "p": 0.1}, {"op": "get", "fault": "timeout", "p": 0.05}, {"op": "get", "fault": "latency", "ms": 50}]}`,
		`{"seed": 3, "rules": [{"op": "*", "fault": "internal_error", "after_ms": 10, "for_ms": 5, "every_ms": 20, "max": 3, "prefix": "wal/"}]}`,
		`{"rules": [{"op": "get", "fault": "short_read"}, {"op": "list", "fault": "reset"}]}`,
		`{"rules": []}`, `{}`, `[]`, `{"rules": [{"op": "x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := objstore.ParseFaultProfile(data)
		if err != nil {
			if p != nil {
				t.Fatal("a profile with an error")
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		// A valid profile drives a bucket without panics.
		fb := objstore.WithFaults(objstore.NewMem(), p)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = fb.Put(ctx, "k", []byte("v"))
		_, _ = fb.Get(ctx, "k")
		_, _ = fb.GetRange(ctx, "k", 0, 1)
		_, _ = fb.Stat(ctx, "k")
		_ = fb.List(ctx, "", func(objstore.ObjectInfo) error { return nil })
		_ = fb.Delete(ctx, "k")
	})
}

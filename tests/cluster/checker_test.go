package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// ledgerWith builds a ledger of attempts on partition 0, answered as given (acked ones at
// the offsets given), and the log that holds keys in order.
func ledgerWith(t *testing.T, answers []struct {
	k   AttemptKey
	out Outcome
	off int64
}) *Ledger {
	t.Helper()
	l := NewLedger()
	for _, a := range answers {
		rec, val := makeRecord(a.k, 0, 8)
		l.sent([]AttemptKey{a.k}, []int32{0}, []streamapi.Record{rec}, [][]byte{val}, "n")
		var offs []streamapi.RecordOffset
		if a.out == Acked {
			offs = []streamapi.RecordOffset{{Partition: 0, Offset: a.off}}
		}
		l.answered([]AttemptKey{a.k}, Request{Sent: time.Now(), Done: time.Now(), OK: a.out == Acked}, offs, a.out)
	}
	return l
}

func entry(off int64, k AttemptKey) Entry {
	rec, val := makeRecord(k, 0, 8)
	return Entry{Offset: off, Key: k, RecordKey: *rec.Key, Value: val}
}

func TestVerify(t *testing.T) {
	a0, a1, a2 := AttemptKey{ID: 1}, AttemptKey{ID: 2}, AttemptKey{ID: 3}
	retry := AttemptKey{ID: 3, Attempt: 1}
	failed := AttemptKey{ID: 4}
	answers := []struct {
		k   AttemptKey
		out Outcome
		off int64
	}{{a0, Acked, 0}, {a1, Acked, 1}, {a2, Unknown, 0}, {retry, Acked, 3}, {failed, Failed, 0}}
	good := Log{0: {entry(0, a0), entry(1, a1), entry(2, a2), entry(3, retry)}}

	rep := Verify(good, ledgerWith(t, answers))
	if len(rep.Violations) != 0 {
		t.Fatalf("clean log: %v", rep.Violations)
	}
	if rep.Records != 4 || rep.Acked != 3 || rep.Failed != 1 || rep.Unknown != 1 || rep.UnknownPresent != 1 || rep.RetriedPresent != 1 {
		t.Fatalf("report %s", rep)
	}

	wrongBytes := entry(1, a1)
	wrongBytes.Value = []byte(`{"id":2,"a":0,"pad":"x"}`)
	for name, tc := range map[string]struct {
		log  Log
		want string
	}{
		"lost ack":          {Log{0: {entry(0, a0), entry(1, a2), entry(2, retry)}}, "acknowledged attempt 2#0 (partition 0 offset 1) is missing"},
		"moved ack":         {Log{0: {entry(0, a0), entry(1, a2), entry(2, a1), entry(3, retry)}}, "attempt 2#0 is here but was acknowledged at offset 1"},
		"duplicate attempt": {Log{0: {entry(0, a0), entry(1, a1), entry(2, a2), entry(3, retry), entry(4, a2)}}, "attempt 3#0 present 2 times"},
		"refused present":   {Log{0: {entry(0, a0), entry(1, a1), entry(2, retry), entry(3, failed)}}, "attempt 4#0 is present although its request was refused"},
		"never sent":        {Log{0: {entry(0, a0), entry(1, a1), entry(2, AttemptKey{ID: 99}), entry(3, retry)}}, "attempt 99#0 was never sent"},
		"gap":               {Log{0: {entry(0, a0), entry(2, a1)}}, "position 1 holds offset 2"},
		"bytes differ":      {Log{0: {entry(0, a0), wrongBytes, entry(2, a2), entry(3, retry)}}, "attempt 2#0 differs from what was sent"},
	} {
		rep := Verify(tc.log, ledgerWith(t, answers))
		if !strings.Contains(strings.Join(rep.Violations, "\n"), tc.want) {
			t.Errorf("%s: violations %q, want one containing %q", name, rep.Violations, tc.want)
		}
	}

	// A tailer read that the final log contradicts, or that is past its end.
	l := ledgerWith(t, answers)
	l.observe(0, 2, []AttemptKey{retry}, "n")
	if rep := Verify(good, l); !strings.Contains(strings.Join(rep.Violations, "\n"), "offset 2: read as 3#1 during the load, the log holds 3#0") {
		t.Errorf("contradicted read: %v", rep.Violations)
	}
	l = ledgerWith(t, answers)
	l.observe(0, 4, []AttemptKey{a2}, "n")
	if rep := Verify(good, l); !strings.Contains(strings.Join(rep.Violations, "\n"), "but the log ends at 4") {
		t.Errorf("read past the end: %v", rep.Violations)
	}
	// Two reads of one offset that disagree, and two acks of one offset, are recorded
	// while the load runs.
	l = ledgerWith(t, answers)
	l.observe(0, 0, []AttemptKey{a1}, "n")
	l.observe(0, 0, []AttemptKey{a0}, "n")
	l.answered([]AttemptKey{a2}, Request{OK: true}, []streamapi.RecordOffset{{Partition: 0, Offset: 0}}, Acked)
	vs := strings.Join(Verify(good, l).Violations, "\n")
	for _, want := range []string{"offset 0 read as 2#0 earlier and as 1#0", "offset 0/0 acknowledged twice: 1#0 and 3#0"} {
		if !strings.Contains(vs, want) {
			t.Errorf("violations %q lack %q", vs, want)
		}
	}
}

func TestResumption(t *testing.T) {
	l := NewLedger()
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, r := range []Request{
		{Sent: at(-1), Done: at(0.5), OK: true},   // sent before the kill
		{Sent: at(0.1), Done: at(2.5), OK: false}, // failed
		{Sent: at(0.2), Done: at(1.9), OK: true},
		{Sent: at(0.9), Done: at(1.4), OK: true}, // the first success of a request sent after t0
	} {
		l.requests = append(l.requests, r)
	}
	if d, ok := l.Resumption(t0); !ok || d != 1400*time.Millisecond {
		t.Fatalf("Resumption = %v, %v; want 1.4s", d, ok)
	}
	if _, ok := l.Resumption(at(3)); ok {
		t.Fatal("no request after 3s, yet a resumption")
	}
	if p := l.LatencyP50(at(-2), at(1)); p != 1500*time.Millisecond && p != 1700*time.Millisecond {
		t.Fatalf("p50 %v", p)
	}
}

func TestSameLog(t *testing.T) {
	a := Log{0: {entry(0, AttemptKey{ID: 1}), entry(1, AttemptKey{ID: 2})}}
	b := Log{0: {entry(0, AttemptKey{ID: 1}), entry(1, AttemptKey{ID: 3})}}
	c := Log{0: {entry(0, AttemptKey{ID: 1})}}
	if d := SameLog(a, a); d != "" {
		t.Fatal(d)
	}
	if d := SameLog(a, b); !strings.Contains(d, "offset 1") {
		t.Fatal(d)
	}
	if d := SameLog(a, c); !strings.Contains(d, "2 records vs 1") {
		t.Fatal(d)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{&streamapi.APIError{Status: 503, Detail: streamapi.ErrorDetail{Code: streamapi.CodeCommitFailed}}, Failed},
		{&streamapi.APIError{Status: 503, Detail: streamapi.ErrorDetail{Code: streamapi.CodeCommitUnknown}}, Unknown},
		{&streamapi.APIError{Status: 503, Detail: streamapi.ErrorDetail{Code: streamapi.CodeUnavailable}}, Unknown},
		{&streamapi.APIError{Status: 404, Detail: streamapi.ErrorDetail{Code: streamapi.CodeStreamNotFound}}, Failed},
		{streamapi.ErrNetwork, Unknown},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

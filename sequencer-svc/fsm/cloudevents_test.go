package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

func ceKey(b byte) meta.EventKey { var k meta.EventKey; k[0], k[31] = b, b; return k }

func claim(stream uint64, id uint64, keys ...meta.EventKey) meta.EventClaim {
	return meta.EventClaim{Namespace: "default", StreamID: stream, Node: "n1", Claim: id, Keys: keys,
		Pending: meta.DefaultEventPending, MaxEntries: 100}
}

func statuses(as []meta.EventClaimAnswer) string {
	var b bytes.Buffer
	for _, a := range as {
		b.WriteString(a.Status.String()[:1])
	}
	return b.String()
}

// TestEventLedger walks the ledger's life: claim, in flight for another claim, retry of
// the same claim, complete, duplicate with the original offsets, release, expiry of a
// pending claim and of a done key, pruning and the namespace count.
func TestEventLedger(t *testing.T) {
	h := newHarness(t)
	st := h.stream("events", 2)
	k1, k2, k3 := ceKey(1), ceKey(2), ceKey(3)
	r := h.apply(t0, ClaimEvents(claim(st.ID, 7, k1, k2, k3)))
	if r.Err != nil || statuses(r.Events) != "ccc" {
		t.Fatalf("first claim: %v %v", r.Err, r.Events)
	}
	if r := h.apply(t0+1, ClaimEvents(claim(st.ID, 8, k1, k2))); r.Err != nil || statuses(r.Events) != "ii" {
		t.Fatalf("other claim: %v %v", r.Err, r.Events)
	}
	if r := h.apply(t0+2, ClaimEvents(claim(st.ID, 7, k1))); r.Err != nil || statuses(r.Events) != "c" {
		t.Fatalf("retried claim: %v %v", r.Err, r.Events)
	}
	done := meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 7, Window: time.Hour,
		Done: []meta.EventDone{{Key: k1, Partition: 1, Offset: 40}, {Key: k2, Partition: 0, Offset: 9}}}
	if r := h.apply(t0+3, CompleteEvents(done)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.apply(t0+4, ReleaseEvents(meta.EventRelease{Namespace: "default", StreamID: st.ID, Claim: 8, Keys: []meta.EventKey{k3}})); r.Err != nil {
		t.Fatal(r.Err) // not claim 8's: nothing happens
	}
	r = h.apply(t0+5, ClaimEvents(claim(st.ID, 9, k1, k2, k3)))
	if r.Err != nil || statuses(r.Events) != "ddi" || r.Events[0].Partition != 1 || r.Events[0].Offset != 40 || r.Events[1].Offset != 9 {
		t.Fatalf("after complete: %v %+v", r.Err, r.Events)
	}
	if r := h.apply(t0+6, ReleaseEvents(meta.EventRelease{Namespace: "default", StreamID: st.ID, Claim: 7, Keys: []meta.EventKey{k3}})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.apply(t0+7, ClaimEvents(claim(st.ID, 9, k3))); statuses(r.Events) != "c" {
		t.Fatalf("after release: %+v", r.Events)
	}
	if n, _ := h.f.LedgerCount("default"); n != 3 {
		t.Fatalf("count %d", n)
	}
	// Another stream has its own keys.
	other := h.stream("other", 1)
	if r := h.apply(t0+8, ClaimEvents(claim(other.ID, 1, k1))); statuses(r.Events) != "c" {
		t.Fatalf("other stream: %+v", r.Events)
	}
	// k3's claim (9) lapses after 2 min: another claim takes it.
	lapse := t0 + 7 + meta.DefaultEventPending.Milliseconds()
	if r := h.apply(lapse-1, ClaimEvents(claim(st.ID, 10, k3))); statuses(r.Events) != "i" {
		t.Fatalf("before lapse: %+v", r.Events)
	}
	if r := h.apply(lapse, ClaimEvents(claim(st.ID, 10, k3))); statuses(r.Events) != "c" {
		t.Fatalf("after lapse: %+v", r.Events)
	}
	// A late complete of the lapsed claim 9 leaves claim 10's entry alone.
	h.apply(lapse+1, CompleteEvents(meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 9, Window: time.Hour,
		Done: []meta.EventDone{{Key: k3, Partition: 0, Offset: 1}}}))
	if e, ok, _ := h.f.LedgerEntry(st.ID, k3); !ok || e.GetDone() || e.GetClaim() != 10 {
		t.Fatalf("k3 after a late complete: %v %v", e, ok)
	}
	// k1 and k2 expire after the window and are pruned; the count follows.
	after := t0 + 3 + time.Hour.Milliseconds()
	if r := h.apply(after, ClaimEvents(claim(st.ID, 11, k1))); statuses(r.Events) != "c" {
		t.Fatalf("after the window: %+v", r.Events)
	}
	if _, ok, _ := h.f.LedgerEntry(st.ID, k2); ok {
		t.Fatal("k2 outlived its window")
	}
	entries, size, _ := h.f.LedgerStats()
	if n, _ := h.f.LedgerCount("default"); n != int64(entries) || entries != 1 { // only claim 11's k1 is live; the rest was pruned
		t.Fatalf("after pruning: count %d, entries %d", n, entries)
	}
	t.Logf("%d entries, %d bytes (%d per entry)", entries, size, size/int64(entries))
}

func TestEventLedgerCap(t *testing.T) {
	h := newHarness(t)
	st := h.stream("events", 1)
	c := claim(st.ID, 1, ceKey(1), ceKey(2))
	c.MaxEntries = 3
	h.apply(t0, ClaimEvents(c))
	c = claim(st.ID, 2, ceKey(3), ceKey(4))
	c.MaxEntries = 3
	r := h.apply(t0+1, ClaimEvents(c))
	var full *meta.EventLedgerFullError
	if !errors.As(r.Err, &full) || !errors.Is(r.Err, meta.ErrEventLedgerFull) || full.Namespace != "default" || full.Max != 3 {
		t.Fatalf("over the cap: %v", r.Err)
	}
	if _, ok, _ := h.f.LedgerEntry(st.ID, ceKey(3)); ok {
		t.Fatal("a refused claim claimed a key")
	}
	// Once the first claim lapses its entries are pruned and the claim fits.
	if r := h.apply(t0+meta.DefaultEventPending.Milliseconds(), ClaimEvents(c)); r.Err != nil || statuses(r.Events) != "cc" {
		t.Fatalf("after lapse: %v %+v", r.Err, r.Events)
	}
}

func TestEventLedgerRefusals(t *testing.T) {
	h := newHarness(t)
	st := h.stream("events", 1)
	for name, c := range map[string]meta.EventClaim{
		"no keys":      claim(st.ID, 1),
		"twice":        claim(st.ID, 1, ceKey(1), ceKey(1)),
		"no stream":    claim(st.ID+99, 1, ceKey(1)),
		"short lapse":  func() meta.EventClaim { c := claim(st.ID, 1, ceKey(1)); c.Pending = time.Millisecond; return c }(),
		"no namespace": func() meta.EventClaim { c := claim(st.ID, 1, ceKey(1)); c.Namespace = "nope"; return c }(),
	} {
		if r := h.apply(t0, ClaimEvents(c)); r.Err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if r := h.apply(t0, CompleteEvents(meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 1, Window: 25 * time.Hour})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Errorf("window over 24 h: %v", r.Err)
	}
}

// Golden files of the ledger (testdata/v4/, the format is unchanged: the ledger buckets
// are optional), written once with -golden.create when absent and never regenerated.

func TestGoldenEventLedgerCommands(t *testing.T) {
	for name, cmd := range map[string]*metapb.Command{
		"testdata/v4/event_claim.cmd": ClaimEvents(meta.EventClaim{Namespace: "default", StreamID: 1, Node: "n1", Claim: 0xfeed,
			Keys: []meta.EventKey{ceKey(1), ceKey(2)}, Pending: 2 * time.Minute, MaxEntries: 1000}),
		"testdata/v4/event_complete.cmd": CompleteEvents(meta.EventComplete{Namespace: "default", StreamID: 1, Claim: 0xfeed,
			Window: time.Hour, Done: []meta.EventDone{{Key: ceKey(1), Partition: 0, Offset: 5}}}),
		"testdata/v4/event_release.cmd": ReleaseEvents(meta.EventRelease{Namespace: "default", StreamID: 1, Claim: 0xfeed,
			Keys: []meta.EventKey{ceKey(2)}}),
	} {
		cmd.StampMs = t0 + 5
		b := golden(t, name, func() []byte { b, _ := Encode(cmd); return b })
		got, err := Decode(b)
		if err != nil || got.String() != cmd.String() {
			t.Fatalf("%s: %v: %v", name, err, got)
		}
		if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", name, enc, b)
		}
	}
}

// TestGoldenEventLedgerSnapshot: a snapshot holding done and pending keys restores them.
func TestGoldenEventLedgerSnapshot(t *testing.T) {
	golden(t, "testdata/v4/event_ledger_state.snap", func() []byte {
		h := newHarness(t)
		st := h.stream("events", 2)
		h.apply(t0, ClaimEvents(claim(st.ID, 7, ceKey(1), ceKey(2))))
		h.apply(t0+1, CompleteEvents(meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 7, Window: 24 * time.Hour,
			Done: []meta.EventDone{{Key: ceKey(1), Partition: 1, Offset: 3}}}))
		var buf bytes.Buffer
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Release()
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	})
	f := restoreGolden(t, "testdata/v4/event_ledger_state.snap")
	st, _, err := f.GetStream("default", "events")
	if err != nil {
		t.Fatal(err)
	}
	if e, ok, _ := f.LedgerEntry(st.ID, ceKey(1)); !ok || !e.GetDone() || e.GetPartition() != 1 || e.GetOffset() != 3 {
		t.Fatalf("restored done key: %v %v", e, ok)
	}
	if e, ok, _ := f.LedgerEntry(st.ID, ceKey(2)); !ok || e.GetDone() || e.GetClaim() != 7 {
		t.Fatalf("restored pending key: %v %v", e, ok)
	}
	if n, _ := f.LedgerCount("default"); n != 2 {
		t.Fatalf("restored count %d", n)
	}
}

// FuzzEventLedger applies a sequence of claims, completes and releases (from the input's
// bytes) one entry per batch to one state machine and in a single batch to another: the
// ledgers must agree (Apply is deterministic whatever the batching), and the namespace
// count must equal the entries the ledger holds.
func FuzzEventLedger(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x42, 0x23, 0x81, 0xf0, 0x05})
	f.Add([]byte{0x10, 0x10, 0x50, 0x90, 0xd3, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 64 {
			b = b[:64]
		}
		one, all := newHarness(t), newHarness(t)
		st := one.stream("s", 2)
		all.stream("s", 2)
		var logs []*raft.Log
		stamp := t0
		for _, c := range b {
			stamp += int64(c>>6) * 40_000 // 0, 40 s, 80 s or 120 s later
			key, claimID := ceKey(c&3), uint64(c>>2&3)+1
			var cmd *metapb.Command
			switch c >> 4 & 3 {
			case 0, 1:
				cl := claim(st.ID, claimID, key)
				cl.MaxEntries = 3
				cmd = ClaimEvents(cl)
			case 2:
				cmd = CompleteEvents(meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: claimID, Window: time.Minute,
					Done: []meta.EventDone{{Key: key, Partition: 0, Offset: int64(c)}}})
			default:
				cmd = ReleaseEvents(meta.EventRelease{Namespace: "default", StreamID: st.ID, Claim: claimID, Keys: []meta.EventKey{key}})
			}
			one.apply(stamp, proto.Clone(cmd).(*metapb.Command))
			logs = append(logs, all.entry(stamp, cmd))
		}
		if len(logs) > 0 {
			all.f.ApplyBatch(logs)
		}
		for _, h := range []*harness{one, all} {
			entries, _, err := h.f.LedgerStats()
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := h.f.LedgerCount("default"); n != int64(entries) {
				t.Fatalf("count %d, %d entries", n, entries)
			}
		}
		for k := byte(0); k < 4; k++ {
			e1, ok1, _ := one.f.LedgerEntry(st.ID, ceKey(k))
			e2, ok2, _ := all.f.LedgerEntry(st.ID, ceKey(k))
			if ok1 != ok2 || ok1 && !proto.Equal(e1, e2) {
				t.Fatalf("key %d: one at a time %v %v, in one batch %v %v", k, e1, ok1, e2, ok2)
			}
		}
	})
}

// TestEventLedgerCapIgnoresBatching: whether a claim fits its namespace's cap must not
// depend on how many expired entries earlier batches happened to prune (replicas batch
// entries differently). 9000 keys expire; a claim under a cap of 3000 follows two
// commands. Applied one per batch, pruning (4096 per batch) leaves 808 entries before the
// claim; applied in one batch, the claim sees 9000. Both must answer the same.
func TestEventLedgerCapIgnoresBatching(t *testing.T) {
	var answers []string
	for _, batched := range []bool{false, true} {
		h := newHarness(t)
		st := h.stream("s", 1)
		keys := make([]meta.EventKey, 9000)
		for i := range keys {
			keys[i][0], keys[i][1], keys[i][2] = 0xee, byte(i>>8), byte(i)
		}
		big := claim(st.ID, 1, keys...)
		big.MaxEntries = 100000
		h.apply(t0, ClaimEvents(big))
		later := t0 + meta.DefaultEventPending.Milliseconds() + 1
		noop := func() *metapb.Command {
			return ReleaseEvents(meta.EventRelease{Namespace: "default", StreamID: st.ID, Claim: 99, Keys: []meta.EventKey{ceKey(9)}})
		}
		small := claim(st.ID, 2, ceKey(1), ceKey(2))
		small.MaxEntries = 3000
		var res *Result
		if batched {
			out := h.f.ApplyBatch([]*raft.Log{h.entry(later, noop()), h.entry(later, noop()), h.entry(later, ClaimEvents(small))})
			res = out[2].(*Result)
		} else {
			h.apply(later, noop())
			h.apply(later, noop())
			res = h.apply(later, ClaimEvents(small))
		}
		answers = append(answers, fmt.Sprintf("%v %v", res.Err != nil, statuses(res.Events)))
	}
	if answers[0] != answers[1] || answers[0] != "false cc" {
		t.Fatalf("one command per batch answered %q, one batch %q; want both \"false cc\"", answers[0], answers[1])
	}
}

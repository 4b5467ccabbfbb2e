package fsm

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	bolt "go.etcd.io/bbolt"
)

// runTraceMore runs the trace commands of leases, swaps, trims and the retired set.
func runTraceMore(t *testing.T, h *harness, stamp int64, line string, f []string, kv map[string]string, num func(string) int64) (string, bool) {
	t.Helper()
	part := func(s string) (uint64, int32) {
		sid, p, _ := strings.Cut(s, "/")
		return uint64(num(sid)), int32(num(p))
	}
	entries := func(spec string) []meta.IndexEntry {
		var out []meta.IndexEntry
		for _, es := range strings.Split(spec, ",") {
			// <base>:<count>:<object>@<offset>+<length>
			parts := strings.SplitN(es, ":", 3)
			if len(parts) != 3 {
				t.Fatalf("%s: entry %q", line, es)
			}
			obj, rng, _ := strings.Cut(parts[2], "@")
			off, length, _ := strings.Cut(rng, "+")
			e := meta.IndexEntry{BaseOffset: num(parts[0]), Count: num(parts[1]), Kind: meta.KindWAL, Object: obj, Offset: num(off), Length: num(length)}
			if strings.HasPrefix(obj, "seg/") {
				e.Kind = meta.KindSegment
			}
			out = append(out, e)
		}
		return out
	}
	leaseOut := func(r *Result) string {
		if r.Err != nil {
			return errName(r.Err)
		}
		l := r.Lease
		return fmt.Sprintf("lease %d/%d %s holder=%s epoch=%d expires=%s", l.StreamID, l.Partition, l.Kind, l.Holder, l.Epoch, rel(l.ExpiresMs))
	}
	switch f[0] {
	case "acquire":
		id, p := part(f[1])
		d, err := time.ParseDuration(f[4])
		if err != nil {
			t.Fatalf("%s: ttl: %v", line, err)
		}
		return leaseOut(h.apply(stamp, AcquireLease(id, p, f[2], f[3], d.Milliseconds()))), true
	case "release":
		id, p := part(f[1])
		r := h.apply(stamp, ReleaseLease(meta.Lease{StreamID: id, Partition: p, Kind: f[2], Holder: f[3], Epoch: uint64(num(f[4]))}))
		if r.Err != nil {
			return errName(r.Err), true
		}
		return "ok", true
	case "swap":
		id, p := part(f[1])
		s := meta.IndexSwap{Lease: meta.Lease{StreamID: id, Partition: p, Kind: f[2], Holder: f[3], Epoch: uint64(num(f[4]))},
			Old: entries(kv["old"]), New: entries(kv["new"])}
		r := h.apply(stamp, SwapIndex(s))
		if r.Err != nil {
			return errName(r.Err), true
		}
		return "ok", true
	case "trim":
		id, p := part(f[1])
		r := h.apply(stamp, TrimPartition(id, p, num(f[2])))
		if r.Err != nil {
			return errName(r.Err), true
		}
		st := r.Partition
		return fmt.Sprintf("start=%d hwm=%d bytes=%d", st.LogStart, st.HighWatermark, st.Bytes), true
	case "refs":
		var out []string
		err := h.f.view(func(tx *bolt.Tx) error {
			return tx.Bucket(bRefs).ForEach(func(k, v []byte) error {
				out = append(out, fmt.Sprintf("%s=%d", k, getU64(tx.Bucket(bRefs), k)))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			return "none", true
		}
		return strings.Join(out, "\n"), true
	case "retired":
		limit := 0
		if v, ok := kv["limit"]; ok {
			limit = int(num(v))
		}
		rs, err := h.f.ListRetired(kv["after"], limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s at=%s", r.Key, rel(r.RetiredMs)))
		}
		if len(out) == 0 {
			return "none", true
		}
		return strings.Join(out, "\n"), true
	case "forget":
		if r := h.apply(stamp, ForgetRetired(f[1:])); r.Err != nil {
			return errName(r.Err), true
		}
		return "ok", true
	case "referenced":
		got, err := h.f.Referenced(f[1:])
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(got))
		for i, b := range got {
			out[i] = strconv.FormatBool(b)
		}
		return strings.Join(out, " "), true
	case "events":
		var out []string
		for _, ev := range h.events {
			for _, u := range ev.Partitions {
				s := fmt.Sprintf("index=%d %d/%d start=%d hwm=%d", ev.AppliedIndex, u.StreamID, u.Partition, u.LogStart, u.HighWatermark)
				if len(u.Added) > 0 {
					s += fmt.Sprintf(" added=%d", len(u.Added))
				}
				if u.Replaced {
					s += " replaced"
				}
				out = append(out, s)
			}
			if ev.StreamsChanged {
				out = append(out, fmt.Sprintf("index=%d streams changed", ev.AppliedIndex))
			}
		}
		h.events = nil
		if len(out) == 0 {
			return "none", true
		}
		return strings.Join(out, "\n"), true
	}
	return runTraceProducers(t, h, stamp, line, f, kv, num)
}

// TestTracesTinyLayout runs the golden traces again with two-entry index blocks and every
// commit settled at once: the layout never changes an answer.
func TestTracesTinyLayout(t *testing.T) {
	defer func(b int, s uint64) { blockEntries, settleCommits = b, s }(blockEntries, settleCommits)
	blockEntries, settleCommits = 2, 1
	TestTraces(t)
}

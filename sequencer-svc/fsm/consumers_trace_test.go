package fsm

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// runTraceConsumers runs the consumer commands of the traces (TestTraces):
//
//	heartbeat NS/CONSUMER STREAM MEMBER SESSION [leave]
//	commit-offsets NS/CONSUMER STREAM [member=M] P:OFFSET[:EPOCH[:METADATA]]...
//	describe-consumer NS/CONSUMER
//	list-consumers NS
func runTraceConsumers(t *testing.T, h *harness, stamp int64, f []string, kv map[string]string, num func(string) int64) (string, bool) {
	t.Helper()
	nsName := func(s string) (string, string) { ns, name, _ := strings.Cut(s, "/"); return ns, name }
	switch f[0] {
	case "heartbeat":
		ns, c := nsName(f[1])
		hb := meta.ConsumerHeartbeat{Namespace: ns, Consumer: c, Stream: f[2], Member: f[3]}
		if len(f) > 4 && f[4] != "leave" {
			d, err := time.ParseDuration(f[4])
			if err != nil {
				t.Fatal(err)
			}
			hb.Session = d
		}
		hb.Leave = f[len(f)-1] == "leave"
		r := h.apply(stamp, ConsumerHeartbeat(hb))
		if r.Err != nil {
			return errName(r.Err), true
		}
		ls := make([]string, len(r.Consumer.Leases))
		for i, l := range r.Consumer.Leases {
			ls[i] = fmt.Sprintf("%d@%d", l.Partition, l.Epoch)
			if l.ExpiresMs != r.Consumer.ExpiresMs {
				ls[i] += " expires=" + rel(l.ExpiresMs)
			}
		}
		exp := "-"
		if r.Consumer.ExpiresMs != 0 {
			exp = rel(r.Consumer.ExpiresMs)
		}
		return fmt.Sprintf("members=%d partitions=%d expires=%s leases=[%s]", r.Consumer.Members, r.Consumer.Partitions, exp, strings.Join(ls, " ")), true
	case "commit-offsets":
		ns, c := nsName(f[1])
		cc := meta.ConsumerCommit{Namespace: ns, Consumer: c, Stream: f[2], Member: kv["member"]}
		for _, spec := range f[3:] {
			if strings.Contains(spec, "=") {
				continue
			}
			parts := strings.SplitN(spec, ":", 4)
			o := meta.ConsumerOffset{Partition: int32(num(parts[0])), Offset: num(parts[1])}
			if len(parts) > 2 && parts[2] != "" {
				o.Epoch = uint64(num(parts[2]))
			}
			if len(parts) > 3 {
				o.Metadata = parts[3]
			}
			cc.Offsets = append(cc.Offsets, o)
		}
		if r := h.apply(stamp, CommitConsumerOffsets(cc)); r.Err != nil {
			return errName(r.Err), true
		}
		return "ok", true
	case "describe-consumer":
		ns, c := nsName(f[1])
		st, err := h.f.DescribeConsumer(ns, c)
		if err != nil {
			return errName(err), true
		}
		var out []string
		for _, p := range st.Partitions {
			s := fmt.Sprintf("%s/%d committed=%d", p.Stream, p.Partition, p.Committed)
			if p.Metadata != "" {
				s += fmt.Sprintf(" metadata=%q", p.Metadata)
			}
			if p.Committed >= 0 {
				s += " at=" + rel(p.CommittedMs)
			}
			if p.Holder != "" {
				s += fmt.Sprintf(" holder=%s epoch=%d until=%s", p.Holder, p.Epoch, rel(p.LeaseExpiresMs))
			}
			out = append(out, s)
		}
		for _, m := range st.Members {
			out = append(out, fmt.Sprintf("member %s on %s until=%s", m.Member, m.Stream, rel(m.ExpiresMs)))
		}
		if len(out) == 0 {
			return "empty", true
		}
		return strings.Join(out, "\n"), true
	case "list-consumers":
		names, err := h.f.ListConsumers(f[1])
		if err != nil {
			return errName(err), true
		}
		return "[" + strings.Join(names, " ") + "] " + strconv.Itoa(len(names)), true
	}
	return "", false
}

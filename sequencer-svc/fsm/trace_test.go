package fsm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
)

// TestTraces runs the golden traces in testdata/trace. Each case is
//
//	<command>
//	----
//	<expected output lines>
//	<blank line>
//
// Commands (times are offsets from t0, like +15m or -1s):
//
//	at <offset>                          stamp later commands with t0+offset
//	create-ns <name>
//	create-stream <ns>/<name> <partitions> [class=] [cleanup=] [retention_ms=]
//	update-stream <ns>/<name> [partitions=] [cleanup=]
//	delete-stream <ns>/<name>
//	commit <object> <created offset> <stream>/<partition>:<records>[:<length>][@<pid>/<epoch>/<seq>] ... [whole]
//	                                     whole: all or nothing (meta.CommitWal.AllOrNothing);
//	                                     @: the chunk's producer id, epoch and base sequence
//	init-producer <ns> [name=] [id=] [epoch=] [max=]   InitProducer (max: the namespace cap)
//	producer <id>                        a producer's record (or "none")
//	producer-partition <id> <stream>/<partition>   its state there: epoch and last batches
//	producers <ns>                       the namespace's producer count and producers, LRU first
//	lookup <stream>/<partition> <from> <max>
//	state <ns>/<name>                    partitions: log start, high watermark, bytes
//	dedupe                               stored dedupe records (pruned or not)
//	clock
//	acquire <stream>/<partition> <kind> <holder> <ttl>
//	release <stream>/<partition> <kind> <holder> <epoch>
//	swap <stream>/<partition> <kind> <holder> <epoch> old=<entries> new=<entries>
//	                                     entries: <base>:<count>:<object>@<offset>+<length>,...
//	                                     (kind segment when the object starts with seg/, else WAL)
//	trim <stream>/<partition> <log start>
//	refs                                 reference counts
//	retired [after=<key>] [limit=<n>]    the retired set (times from t0)
//	forget <key>...
//	referenced <key>...
//	events                               partition events published since the last "events"
func TestTraces(t *testing.T) {
	files, _ := filepath.Glob("testdata/trace/*.txt")
	if len(files) == 0 {
		t.Fatal("no traces")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t)
			stamp := t0
			lines := strings.Split(string(b), "\n")
			for i := 0; i < len(lines); i++ {
				cmd := strings.TrimSpace(lines[i])
				if cmd == "" || strings.HasPrefix(cmd, "#") {
					continue
				}
				lineNo := i + 1
				if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
					t.Fatalf("%s:%d: want ---- after the command", file, lineNo)
				}
				i += 2
				var want []string
				for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
					want = append(want, strings.TrimSpace(lines[i]))
				}
				got := runTrace(t, h, &stamp, cmd)
				if got != strings.Join(want, "\n") {
					t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", file, lineNo, cmd, got, strings.Join(want, "\n"))
				}
			}
		})
	}
}

func offsetMs(t *testing.T, s string) int64 {
	t.Helper()
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		t.Fatalf("offset %q: %v", s, err)
	}
	return t0 + d.Milliseconds()
}

func errName(err error) string {
	for _, e := range []error{meta.ErrNamespaceNotFound, meta.ErrStreamNotFound, meta.ErrStreamExists, meta.ErrPartitionNotFound,
		meta.ErrInvalidArgument, meta.ErrStaleCommit, meta.ErrOffsetOutOfRange, meta.ErrLeaseHeld, meta.ErrLeaseLost,
		meta.ErrIndexChanged, meta.ErrProducerFenced, meta.ErrOutOfOrderSequence, meta.ErrUnknownProducer, meta.ErrStaleConsumerEpoch, meta.ErrConsumerNotFound, ErrBadCommand} {
		if errors.Is(err, e) {
			return "error: " + e.Error()
		}
	}
	return "error: " + err.Error()
}

func rel(ms int64) string { return (time.Duration(ms-t0) * time.Millisecond).String() }

func runTrace(t *testing.T, h *harness, stamp *int64, line string) string {
	t.Helper()
	f := strings.Fields(line)
	kv := map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		}
	}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: number %q", line, s)
		}
		return n
	}
	nsName := func(s string) (string, string) { ns, name, _ := strings.Cut(s, "/"); return ns, name }
	streamOut := func(r *Result) string {
		if r.Err != nil {
			return errName(r.Err)
		}
		s := r.Stream
		return fmt.Sprintf("stream id=%d %s/%s partitions=%d class=%s encoding=%s cleanup=%s retention_ms=%d retention_bytes=%d created=%s",
			s.ID, s.Namespace, s.Name, s.Partitions, s.Class, s.Encoding, s.CleanupPolicy, s.RetentionMs, s.RetentionBytes, rel(s.CreatedAtMs))
	}
	switch f[0] {
	case "at":
		*stamp = offsetMs(t, f[1])
		return "ok"
	case "clock":
		return rel(h.f.ClockMs())
	case "create-ns":
		if r := h.apply(*stamp, CreateNamespace(f[1])); r.Err != nil {
			return errName(r.Err)
		}
		return "ok"
	case "create-stream":
		ns, name := nsName(f[1])
		c := meta.StreamConfig{Namespace: ns, Name: name, Partitions: int32(num(f[2])), Class: kv["class"], CleanupPolicy: kv["cleanup"]}
		if v, ok := kv["retention_ms"]; ok {
			c.RetentionMs = num(v)
		}
		return streamOut(h.apply(*stamp, CreateStream(c)))
	case "update-stream":
		ns, name := nsName(f[1])
		var p meta.StreamPatch
		if v, ok := kv["partitions"]; ok {
			n := int32(num(v))
			p.Partitions = &n
		}
		if v, ok := kv["cleanup"]; ok {
			p.CleanupPolicy = &v
		}
		return streamOut(h.apply(*stamp, UpdateStream(ns, name, p)))
	case "delete-stream":
		ns, name := nsName(f[1])
		if r := h.apply(*stamp, DeleteStream(ns, name)); r.Err != nil {
			return errName(r.Err)
		}
		return "ok"
	case "commit":
		c := meta.CommitWal{Object: f[1], CreatedMs: offsetMs(t, f[2])}
		var off int64
		for _, spec := range f[3:] {
			if spec == "whole" {
				c.AllOrNothing = true
				continue
			}
			spec, prod, hasProd := strings.Cut(spec, "@")
			sp, rest, _ := strings.Cut(spec, ":")
			sid, p, _ := strings.Cut(sp, "/")
			parts := strings.Split(rest, ":")
			ch := meta.Chunk{StreamID: uint64(num(sid)), Partition: int32(num(p)), Records: num(parts[0]), Offset: off, Length: 100}
			if len(parts) > 1 {
				ch.Length = num(parts[1])
			}
			if hasProd {
				pf := strings.Split(prod, "/")
				ch.Producer = meta.ChunkProducer{ID: num(pf[0]), Epoch: int16(num(pf[1])), BaseSequence: int32(num(pf[2]))}
			}
			off += ch.Length
			c.Chunks = append(c.Chunks, ch)
		}
		r := h.apply(*stamp, CommitWal(c))
		if r.Err != nil {
			return errName(r.Err)
		}
		bases := make([]string, len(r.Commit.BaseOffsets))
		for i, b := range r.Commit.BaseOffsets {
			bases[i] = strconv.FormatInt(b, 10)
		}
		dup := ""
		if r.Commit.Duplicate {
			dup = " duplicate"
		}
		return fmt.Sprintf("bases=%s%s index=%d%s", strings.Join(bases, ","), refusedOut(r.Commit.Status), r.Commit.AppliedIndex, dup)
	case "lookup":
		sid, p, _ := strings.Cut(f[1], "/")
		es, st, err := h.f.Lookup(uint64(num(sid)), int32(num(p)), num(f[2]), int(num(f[3])))
		if err != nil {
			return errName(err)
		}
		out := []string{fmt.Sprintf("hwm=%d bytes=%d", st.HighWatermark, st.Bytes)}
		for _, e := range es {
			seg := ""
			if e.Kind == meta.KindSegment {
				seg = " segment"
			}
			out = append(out, fmt.Sprintf("[%d,%d) %s@%d+%d%s", e.BaseOffset, e.End(), e.Object, e.Offset, e.Length, seg))
		}
		return strings.Join(out, "\n")
	case "state":
		ns, name := nsName(f[1])
		_, parts, err := h.f.GetStream(ns, name)
		if err != nil {
			return errName(err)
		}
		var out []string
		for _, p := range parts {
			out = append(out, fmt.Sprintf("p%d start=%d hwm=%d bytes=%d", p.Partition, p.LogStart, p.HighWatermark, p.Bytes))
		}
		return strings.Join(out, "\n")
	case "dedupe":
		var out []string
		err := h.f.view(func(tx *bolt.Tx) error {
			return tx.Bucket(bDedupe).ForEach(func(k, v []byte) error {
				var rec metapb.DedupeRecord
				if err := protoUnmarshal(v, &rec); err != nil {
					return err
				}
				out = append(out, fmt.Sprintf("%s bases=%v%s committed=%s expires_key=%s", k, rec.GetBaseOffsets(),
					refusedOut(metapb.ToChunkStatus(rec.GetChunkStatus())), rel(rec.GetCommittedMs()), rel(rec.GetExpiresKeyMs())))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	}
	if out, ok := runTraceMore(t, h, *stamp, line, f, kv, num); ok {
		return out
	}
	t.Fatalf("unknown trace command %q", line)
	return ""
}

// refusedOut prints a commit's duplicate chunks as " duplicates=<chunk>,..." and its
// refused chunks as " refused=<chunk>:<sentinel>,...".
func refusedOut(status []meta.ChunkStatus) string {
	var out, dups []string
	for i, st := range status {
		switch st {
		case meta.ChunkCommitted:
		case meta.ChunkDuplicate:
			dups = append(dups, strconv.Itoa(i))
		default:
			out = append(out, fmt.Sprintf("%d:%s", i, strings.TrimPrefix(st.Err().Error(), "meta: ")))
		}
	}
	s := ""
	if len(dups) > 0 {
		s = " duplicates=" + strings.Join(dups, ",")
	}
	if len(out) > 0 {
		s += " refused=" + strings.Join(out, ",")
	}
	return s
}

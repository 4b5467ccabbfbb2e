package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
)

// runTraceProducers runs the producer commands of the traces (TestTraces).
func runTraceProducers(t *testing.T, h *harness, stamp int64, line string, f []string, kv map[string]string, num func(string) int64) (string, bool) {
	t.Helper()
	switch f[0] {
	case "init-producer":
		var id, epoch, limit int64
		if v, ok := kv["id"]; ok {
			id = num(v)
		}
		if v, ok := kv["epoch"]; ok {
			epoch = num(v)
		}
		if v, ok := kv["max"]; ok {
			limit = num(v)
		}
		r := h.apply(stamp, InitProducer(f[1], kv["name"], id, int16(epoch), int(limit)))
		if r.Err != nil {
			return errName(r.Err), true
		}
		return fmt.Sprintf("producer id=%d epoch=%d", r.Producer.ID, r.Producer.Epoch), true
	case "producer":
		var out string
		err := h.f.view(func(tx *bolt.Tx) error {
			v := tx.Bucket(bProducers).Get(u64(uint64(num(f[1]))))
			if v == nil {
				out = "none"
				return nil
			}
			var rec metapb.ProducerRecord
			if err := protoUnmarshal(v, &rec); err != nil {
				return err
			}
			out = fmt.Sprintf("ns=%s name=%q epoch=%d bumped_from=%d last=%s", rec.GetNamespace(), rec.GetName(), rec.GetEpoch(),
				rec.GetBumpedFrom(), rel(rec.GetLastMs()))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, true
	case "producer-partition":
		sid, p, _ := strings.Cut(f[2], "/")
		var out string
		err := h.f.view(func(tx *bolt.Tx) error {
			v := tx.Bucket(bProducerParts).Get(producerPartKey(num(f[1]), uint64(num(sid)), int32(num(p))))
			if v == nil {
				out = "none"
				return nil
			}
			var rec metapb.ProducerPartitionRecord
			if err := protoUnmarshal(v, &rec); err != nil {
				return err
			}
			bs := make([]string, len(rec.GetFirstSeq()))
			for i := range bs {
				bs[i] = fmt.Sprintf("%d..%d@%d", rec.FirstSeq[i], rec.LastSeq[i], rec.BaseOffset[i])
			}
			out = fmt.Sprintf("epoch=%d batches=%s", rec.GetEpoch(), strings.Join(bs, ","))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, true
	case "producers":
		var out []string
		err := h.f.view(func(tx *bolt.Tx) error {
			out = append(out, fmt.Sprintf("count=%d", getU64(tx.Bucket(bProducerCounts), []byte(f[1]))))
			prefix := streamKey(f[1], "")
			c := tx.Bucket(bProducerLRU).Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				rest := k[len(prefix):]
				out = append(out, fmt.Sprintf("id=%d last=%s", binary.BigEndian.Uint64(rest[8:]), rel(int64(binary.BigEndian.Uint64(rest)))))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, "\n"), true
	}
	return runTraceConsumers(t, h, stamp, f, kv, num)
}

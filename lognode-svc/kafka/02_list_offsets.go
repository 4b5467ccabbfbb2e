package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// ListOffsets: versions 1-8.
//
// Behaviour: timestamp -1 (latest) answers the high watermark, -2 (earliest) and -4
// (earliest local: everything is local) the log start, -3 (max timestamp, v7+) the offset
// of the record with the largest timestamp, any other timestamp T the first offset whose
// record's timestamp is at least T, found through the offset index's max timestamps
// (then the one batch that holds it is read), or offset -1 when no record is that late.
//
// Ignored: ReplicaID, IsolationLevel (no transactions), CurrentLeaderEpoch.
const (
	listOffsetsMin = 1
	listOffsetsMax = 8
)

// lookupPage is how many index entries one Lookup of a timestamp search asks for.
const lookupPage = 1000

func (c *conn) listOffsets(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(t.Partitions))
		st, serr := c.s.cfg.Streams.Stream(ctx, c.ns, t.Topic)
		ist, internal := group.InternalStream(c.ns, t.Topic)
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch = -1
			switch {
			case internal && (p.Partition < 0 || p.Partition >= ist.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case internal:
				// Empty: earliest and latest are 0, a time or the max timestamp finds nothing.
				rp.Offset, rp.Timestamp = 0, -1
				if p.Timestamp >= 0 || p.Timestamp == -3 {
					rp.Offset = -1
				}
				continue
			case serr != nil:
				rp.ErrorCode = code(serr)
				continue
			case p.Partition < 0 || p.Partition >= st.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			off, ts, err := c.offsetFor(ctx, st, p.Partition, p.Timestamp)
			rp.ErrorCode, rp.Offset, rp.Timestamp = code(err), off, ts
			rp.LeaderEpoch = -1
		}
	}
	return resp, nil
}

// offsetFor answers ListOffsets' offset and timestamp for one partition.
func (c *conn) offsetFor(ctx context.Context, st meta.Stream, p int32, ts int64) (int64, int64, error) {
	_, ps, err := c.s.cfg.Meta.Lookup(ctx, st.ID, p, 0, 0)
	if err != nil {
		return -1, -1, err
	}
	switch ts {
	case -1:
		return ps.HighWatermark, -1, nil
	case -2, -4:
		return ps.LogStart, -1, nil
	case -3:
		return c.maxTimestamp(ctx, st, p, ps)
	}
	if ts < 0 {
		return -1, -1, fmt.Errorf("%w: timestamp %d is neither a time nor -1..-4", meta.ErrInvalidArgument, ts)
	}
	return c.searchTimestamp(ctx, st, p, ps, ts)
}

// searchTimestamp finds the first record at or after ts: the first index entry whose max
// timestamp reaches ts, then the first record of its batches that does.
func (c *conn) searchTimestamp(ctx context.Context, st meta.Stream, p int32, ps meta.PartitionState, ts int64) (int64, int64, error) {
	for from := ps.LogStart; from < ps.HighWatermark; {
		es, now, err := c.s.cfg.Meta.Lookup(ctx, st.ID, p, from, lookupPage)
		if err != nil {
			return -1, -1, err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if e.MaxTimestamp < ts || e.End() <= from {
				continue
			}
			off, at, found, err := c.scanEntry(ctx, st, p, max(e.BaseOffset, from), e.End(), func(rts int64) bool { return rts >= ts })
			if err != nil {
				return -1, -1, err
			}
			if found {
				return off, at, nil
			}
		}
		from = es[len(es)-1].End()
		ps.HighWatermark = now.HighWatermark
	}
	return -1, -1, nil
}

// maxTimestamp finds the record with the largest timestamp (the first of them).
func (c *conn) maxTimestamp(ctx context.Context, st meta.Stream, p int32, ps meta.PartitionState) (int64, int64, error) {
	best := meta.IndexEntry{MaxTimestamp: -1}
	for from := ps.LogStart; from < ps.HighWatermark; {
		es, _, err := c.s.cfg.Meta.Lookup(ctx, st.ID, p, from, lookupPage)
		if err != nil {
			return -1, -1, err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if e.MaxTimestamp > best.MaxTimestamp {
				best = e
			}
		}
		from = es[len(es)-1].End()
	}
	if best.MaxTimestamp < 0 {
		return -1, -1, nil
	}
	want := best.MaxTimestamp
	off, at, found, err := c.scanEntry(ctx, st, p, max(best.BaseOffset, ps.LogStart), best.End(), func(rts int64) bool { return rts >= want })
	if err != nil || !found {
		return -1, -1, err
	}
	return off, at, nil
}

// scanEntry reads offsets [from, end) and answers the first record (at or after from)
// whose timestamp satisfies ok.
func (c *conn) scanEntry(ctx context.Context, st meta.Stream, p int32, from, end int64, ok func(int64) bool) (int64, int64, bool, error) {
	if st.Encoding == meta.EncodingArrow {
		return c.scanArrow(ctx, st, p, from, end, ok) // 01_fetch_arrow.go
	}
	for from < end {
		res, err := c.s.cfg.Reader.Fetch(ctx, st.ID, p, from, 1<<20, 0)
		if err != nil {
			return -1, -1, false, err
		}
		if len(res.Batches) == 0 {
			break
		}
		for _, raw := range res.Batches {
			b, _, err := recordbatch.Parse(raw)
			if err != nil {
				return -1, -1, false, err
			}
			if b.LastOffset() < from || !ok(b.MaxTimestamp) && !b.LogAppendTime() {
				continue
			}
			recs, err := b.Records()
			if err != nil {
				return -1, -1, false, err
			}
			for _, rc := range recs {
				off := b.BaseOffset + int64(rc.OffsetDelta)
				rts := rc.Timestamp
				if b.LogAppendTime() {
					rts = b.MaxTimestamp
				}
				if off >= from && ok(rts) {
					return off, rts, true, nil
				}
			}
		}
		if res.NextOffset <= from {
			break
		}
		from = res.NextOffset
	}
	return -1, -1, false, nil
}

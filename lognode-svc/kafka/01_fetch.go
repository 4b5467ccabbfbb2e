package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/shared/meta"
)

// Fetch: versions 4-12 (v13's topic ids are not served).
//
// Behaviour: each partition answers the stored RecordBatch bytes from its fetch offset
// verbatim (baseOffset patched to the assigned offset, never re-encoded; the first batch
// may start before the fetch offset, as a broker's does), its high watermark (also the
// last stable offset: there are no transactions) and log start. PartitionMaxBytes bounds
// each partition and MaxBytes the answer (at most httpapi.MaxFetchBytes), except that the
// first partition with data answers at least one batch, as brokers do. While the answer
// holds less than MinBytes and nothing failed, the fetch waits on the partitions'
// high-watermark watch (the one the HTTP long-poll uses) up to MaxWaitMillis (at most
// httpapi.MaxWait). A fetch offset outside [log start, high watermark] answers
// OFFSET_OUT_OF_RANGE; a missing topic or partition UNKNOWN_TOPIC_OR_PARTITION.
//
// Ignored: IsolationLevel (read_committed reads what read_uncommitted does: no
// transactions), CurrentLeaderEpoch and LastFetchedEpoch (no leader epochs: Metadata
// answers -1), Rack, ReplicaID. Fetch sessions are not kept: a request creating one is
// answered as a full fetch with session id 0, and an incremental one (a session id) is
// answered FETCH_SESSION_ID_NOT_FOUND, after which clients fetch in full.
const (
	fetchMin = 4
	fetchMax = 12
)

// fetchPart is one requested partition being served.
type fetchPart struct {
	t, p    int
	part    int32
	st      meta.Stream
	offset  int64
	max     int
	hwm     int64 // what the last pass saw
	settled bool  // answered an error: not read again
}

func (c *conn) fetch(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	wait = min(wait, httpapi.MaxWait)
	deadline := time.Now().Add(wait)
	total := int(req.MaxBytes)
	if total <= 0 || total > httpapi.MaxFetchBytes {
		total = httpapi.MaxFetchBytes
	}
	var parts []*fetchPart
	internalOnly := false
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		st, serr := c.s.cfg.Streams.Stream(ctx, c.ns, t.Topic)
		ist, internal := group.InternalStream(c.ns, t.Topic)
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null record set
			switch {
			case internal && (p.Partition < 0 || p.Partition >= ist.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case internal:
				// Always empty: log start and high watermark 0 (an offset past it is out of range).
				if p.FetchOffset != 0 {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
				}
				internalOnly = true
			case serr != nil:
				rp.ErrorCode = code(serr)
			case p.Partition < 0 || p.Partition >= st.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				pm := int(p.PartitionMaxBytes)
				if pm <= 0 || pm > httpapi.MaxFetchBytes {
					pm = httpapi.MaxFetchBytes
				}
				parts = append(parts, &fetchPart{t: ti, p: pi, part: p.Partition, st: st, offset: p.FetchOffset, max: pm})
			}
		}
	}
	if len(parts) == 0 && internalOnly {
		// Only the empty internal topic: wait as a fetch at the high watermark does, so a
		// consumer of it does not spin.
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp, nil
	}
	for {
		got, failed := c.fetchPass(ctx, resp, parts, total)
		left := time.Until(deadline)
		if failed || got >= int(req.MinBytes) || got > 0 && req.MinBytes <= 0 || left <= 0 || len(parts) == 0 || ctx.Err() != nil {
			return resp, nil
		}
		if err := c.awaitData(ctx, parts, left); err != nil {
			return resp, nil // the connection is closing or the node draining: answer what there is
		}
	}
}

// fetchPass reads every partition once, without waiting, into resp. It answers the bytes
// gathered and whether any partition failed (a fetch with a failure answers at once).
func (c *conn) fetchPass(ctx context.Context, resp *kmsg.FetchResponse, parts []*fetchPart, total int) (int, bool) {
	got, failed := 0, false
	for _, fp := range parts {
		rp := &resp.Topics[fp.t].Partitions[fp.p]
		if fp.settled {
			continue
		}
		limit := min(fp.max, total-got)
		if limit <= 0 && got > 0 {
			limit = 0
		}
		var res reader.Result
		var err error
		if fp.st.Encoding == meta.EncodingArrow {
			res, err = c.fetchArrow(ctx, fp, max(limit, 1)) // 01_fetch_arrow.go
		} else {
			res, err = c.s.cfg.Reader.Fetch(ctx, fp.st.ID, fp.part, fp.offset, max(limit, 1), 0)
		}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.HighWatermark, res.LogStart
		if err != nil {
			rp.ErrorCode, rp.RecordBatches = code(err), []byte{}
			fp.settled, failed = true, true
			continue
		}
		fp.hwm = res.HighWatermark
		if limit <= 0 && got > 0 {
			rp.RecordBatches = []byte{} // the answer is full: the next fetch gets this partition's data
			continue
		}
		rp.RecordBatches = joinBatches(res.Batches)
		got += len(rp.RecordBatches)
	}
	return got, failed
}

// awaitData waits up to wait for any partition's high watermark to pass what the last
// pass saw.
func (c *conn) awaitData(ctx context.Context, parts []*fetchPart, wait time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moved := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for _, fp := range parts {
		if fp.settled {
			continue
		}
		wg.Add(1)
		go func(fp *fetchPart, partition int32) {
			defer wg.Done()
			if fp.st.Encoding == meta.EncodingArrow {
				if c.awaitArrow(wctx, fp, wait) { // 01_fetch_arrow.go
					select {
					case moved <- struct{}{}:
					default:
					}
				}
				return
			}
			res, err := c.s.cfg.Reader.Fetch(wctx, fp.st.ID, partition, fp.hwm, 1, wait)
			if err == nil && res.HighWatermark <= fp.hwm {
				return // waited its time: nothing came
			}
			if err != nil && wctx.Err() != nil {
				return // the wait was called off (another partition moved, or the request ended)
			}
			select {
			case moved <- struct{}{}:
			default:
			}
		}(fp, fp.part)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-moved:
		cancel()
		<-done
		return nil
	case <-done:
		select {
		case <-moved:
			return nil
		default:
		}
		return fmt.Errorf("kafka: fetch wait ended with nothing new")
	}
}

// joinBatches is batches end to end: the one batch itself (the reader's batches are not
// changed once answered), or one copy into a slice of the exact size.
func joinBatches(batches [][]byte) []byte {
	switch len(batches) {
	case 0:
		return []byte{}
	case 1:
		return batches[0]
	}
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// fetchFrameSize is about the size of resp's frame: its record bytes and a bound on the
// rest, so that the frame is encoded into one allocation.
func fetchFrameSize(resp *kmsg.FetchResponse) int {
	n := 64
	for i := range resp.Topics {
		t := &resp.Topics[i]
		n += 32 + len(t.Topic)
		for j := range t.Partitions {
			n += 96 + len(t.Partitions[j].RecordBatches)
		}
	}
	return n
}

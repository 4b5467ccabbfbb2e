package httpapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/cloudevents"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// CloudEvents 1.0 ingest and consume (docs/cloudevents.md).
//
//	POST /v1/namespaces/{ns}/streams/{stream}/events[?partition=p]
//	GET  /v1/namespaces/{ns}/streams/{stream}/partitions/{p}/events?offset=&max_bytes=&max_wait_ms=&token=&mode=structured|binary
//
// Ingest takes one event in structured JSON or protobuf, a batch in JSON or protobuf, or
// one event in HTTP binary mode (ce-* headers); anything else is 415. Every event is
// validated before anything is claimed or written (a bad one refuses the whole request,
// naming its index and attribute), then deduplicated by source + id in the sequencer's
// ledger (IngestEvents). The answer lists each event's status, partition and offset: 200,
// or 409 with Retry-After when any event is in flight under another request.
//
// Consume reads records back as events (cloudevents.FromRecord): mode=structured (the
// default) answers a JSON batch with Loam-Next-Offset and Loam-High-Watermark; mode=binary
// answers the record at offset as one binary-mode message with Loam-Offset and
// Loam-Next-Offset, or 204 when the wait ends with no record.

// Error codes of the CloudEvents routes.
const (
	CodeInvalidEvent     = "invalid_event"
	CodeDedupLedgerFull  = "dedup_ledger_full"
	CodeEventsInFlight   = "events_in_flight"
	eventsInFlightRetryS = 1
)

// CloudEventsConfig sets the dedup ledger's parameters of a node.
type CloudEventsConfig struct {
	// Window is how long an appended event's key is kept (default meta.DefaultEventWindow,
	// at most meta.MaxEventWindow): a retry within it never appends again.
	Window time.Duration
	// Pending is how long a claim lives unless completed or released (default
	// meta.DefaultEventPending).
	Pending time.Duration
	// MaxEntries caps each namespace's live ledger entries (default
	// meta.DefaultMaxEventEntries); a request over it answers 429 dedup_ledger_full.
	MaxEntries int64
	// AfterAppend, when set (a failpoint for tests), runs after the append committed and
	// before Complete; an error ends the request there, as a node that died would.
	AfterAppend func() error
}

func (c *CloudEventsConfig) defaults() {
	if c.Window == 0 {
		c.Window = meta.DefaultEventWindow
	}
	if c.Pending == 0 {
		c.Pending = meta.DefaultEventPending
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = meta.DefaultMaxEventEntries
	}
}

// Validate checks the bounds.
func (c CloudEventsConfig) Validate() error {
	c.defaults()
	if err := meta.CheckEventWindow(c.Window); err != nil {
		return fmt.Errorf("httpapi: --cloudevents-dedup-window: %w", err)
	}
	if c.Pending < time.Second || c.Pending > meta.MaxEventPending {
		return fmt.Errorf("httpapi: CloudEvents claim pending %v is out of range [1s, %v]", c.Pending, meta.MaxEventPending)
	}
	if c.MaxEntries < 0 {
		return fmt.Errorf("httpapi: CloudEvents ledger cap %d is negative", c.MaxEntries)
	}
	return nil
}

// EventOutcome is one event's answer.
type EventOutcome struct {
	Status    meta.EventStatus // EventClaimed here means appended by this request
	Partition int32
	Offset    int64 // -1 while in flight
}

// EventsResult answers IngestEvents.
type EventsResult struct {
	Events   []EventOutcome
	Token    uint64 // applied index of the append (0: nothing appended)
	InFlight bool   // some event is pending under another request
}

// EventIngest is what IngestEvents needs of a node; HTTP and gRPC share it.
type EventIngest struct {
	Meta   meta.Client
	Writer writer.Writer
	NodeID string
	Config CloudEventsConfig
	Limits Limits
	Now    func() time.Time
	Logger *slog.Logger // nil: slog.Default()
}

// IngestEvents appends validated events to st, deduplicated by source + id: it places
// every event (partition when >= 0, else murmur2 of its partitionkey, else the hash of its
// key), coalesces repeats of one key, claims the keys in one proposal, appends the
// claimed events in one write, and completes them (or, when the write definitely failed,
// releases them; a write of unknown outcome keeps them pending until they lapse).
func IngestEvents(ctx context.Context, in EventIngest, st meta.Stream, events []*cloudevents.Event, partition int32) (EventsResult, error) {
	cfg := in.Config
	cfg.defaults()
	in.Limits.defaults()
	if in.Now == nil {
		in.Now = time.Now
	}
	if len(events) == 0 {
		return EventsResult{}, badInput(400, CodeInvalidEvent, "the request holds no event")
	}
	if len(events) > min(in.Limits.MaxRecords, meta.MaxEventKeys) {
		return EventsResult{}, badInput(413, streamapi.CodeRequestTooLarge, "the request has %d events, more than the limit of %d", len(events), min(in.Limits.MaxRecords, meta.MaxEventKeys))
	}
	if partition >= st.Partitions {
		return EventsResult{}, badInput(400, streamapi.CodePartitionNotFound, "partition %d does not exist: the stream has partitions 0..%d", partition, st.Partitions-1)
	}
	nowMs := in.Now().UnixMilli()
	n := len(events)
	recs := make([]recordbatch.Record, n)
	parts := make([]int32, n)
	keys := make([]meta.EventKey, n)
	first := make([]int, n) // index of the first event with the same key
	seen := make(map[meta.EventKey]int, n)
	var unique []meta.EventKey
	var uniqueAt []int // event index of each unique key
	for i, e := range events {
		recs[i] = cloudevents.Record(e)
		recs[i].Timestamp = nowMs
		if size := cloudevents.Size(e); size > in.Limits.MaxRecordBytes {
			return EventsResult{}, badInput(413, streamapi.CodeRecordTooLarge, "event %d: %d bytes of key, value and headers, more than the limit of %d", i, size, in.Limits.MaxRecordBytes)
		}
		keys[i] = e.Key()
		switch {
		case partition >= 0:
			parts[i] = partition
		case recs[i].Key != nil:
			parts[i] = streamapi.KeyPartition(recs[i].Key, st.Partitions)
		default:
			parts[i] = int32(binary.BigEndian.Uint32(keys[i][:4]) % uint32(st.Partitions))
		}
		if j, ok := seen[keys[i]]; ok {
			first[i] = j
			continue
		}
		seen[keys[i]] = i
		first[i] = i
		unique = append(unique, keys[i])
		uniqueAt = append(uniqueAt, i)
	}
	claim := rand.Uint64() | 1
	answers, err := in.Meta.ClaimEvents(ctx, meta.EventClaim{Namespace: st.Namespace, StreamID: st.ID, Node: in.NodeID, Claim: claim,
		Keys: unique, Pending: cfg.Pending, MaxEntries: cfg.MaxEntries})
	if err != nil {
		return EventsResult{}, err
	}
	if len(answers) != len(unique) {
		return EventsResult{}, fmt.Errorf("%w: claim events: %d answers for %d keys", meta.ErrUnavailable, len(answers), len(unique))
	}
	out := EventsResult{Events: make([]EventOutcome, n)}
	// The claimed events, one request per partition in order of first use.
	var reqs []writer.Request
	reqOf := map[int32]int{}
	within := make([]int32, n)
	var batches [][]recordbatch.Record
	var claimedAt []int
	for u, a := range answers {
		i := uniqueAt[u]
		switch a.Status {
		case meta.EventDuplicate:
			out.Events[i] = EventOutcome{Status: meta.EventDuplicate, Partition: a.Partition, Offset: a.Offset}
			continue
		case meta.EventInFlight:
			out.Events[i] = EventOutcome{Status: meta.EventInFlight, Partition: parts[i], Offset: -1}
			out.InFlight = true
			continue
		case meta.EventClaimed:
		default:
			return EventsResult{}, fmt.Errorf("%w: claim events: unknown status %d", meta.ErrUnavailable, a.Status)
		}
		r, ok := reqOf[parts[i]]
		if !ok {
			r = len(batches)
			reqOf[parts[i]] = r
			batches = append(batches, nil)
		}
		rec := recs[i]
		rec.OffsetDelta = int32(len(batches[r]))
		within[i] = rec.OffsetDelta
		batches[r] = append(batches[r], rec)
		claimedAt = append(claimedAt, i)
	}
	var res []writer.Result
	if len(batches) > 0 {
		reqs = make([]writer.Request, len(batches))
		for p, r := range reqOf {
			b, err := recordbatch.Append(nil, batches[r], recordbatch.DefaultBuildOptions())
			if err != nil {
				in.release(st, claim, claimedAt, keys)
				return EventsResult{}, badInput(400, CodeInvalidEvent, "partition %d: %v", p, err)
			}
			reqs[r] = writer.Request{StreamID: st.ID, Partition: p, Batches: b, Records: int64(len(batches[r])), MaxTimestamp: nowMs}
		}
		wctx, cancel := context.WithTimeout(ctx, in.Limits.ProduceWait)
		res, err = in.Writer.Write(wctx, reqs)
		cancel()
		partial := errors.Is(err, writer.ErrPartialCommit) && len(res) == len(reqs)
		if err != nil && !partial {
			if errors.Is(err, writer.ErrCommitFailed) || errors.Is(err, writer.ErrClosed) || errors.Is(err, writer.ErrInvalidRequest) {
				in.release(st, claim, claimedAt, keys) // nothing was written
			}
			return EventsResult{}, &writeFailure{err}
		}
		var done []meta.EventDone
		var refused []int
		var refusal error
		for _, i := range claimedAt {
			rs := res[reqOf[parts[i]]]
			if rs.Err != nil {
				refused = append(refused, i)
				refusal = rs.Err
				continue
			}
			off := rs.BaseOffset + int64(within[i])
			out.Events[i] = EventOutcome{Status: meta.EventClaimed, Partition: parts[i], Offset: off}
			out.Token = max(out.Token, rs.Token)
			done = append(done, meta.EventDone{Key: keys[i], Partition: parts[i], Offset: off})
		}
		if cfg.AfterAppend != nil {
			if err := cfg.AfterAppend(); err != nil {
				return EventsResult{}, fmt.Errorf("%w: stopped after the append: %w", meta.ErrUnavailable, err)
			}
		}
		in.complete(st, claim, done, cfg.Window)
		if len(refused) > 0 {
			in.release(st, claim, refused, keys)
			return EventsResult{}, &writeFailure{refusal}
		}
	}
	for i := range events {
		if j := first[i]; j != i {
			o := out.Events[j]
			if o.Status == meta.EventClaimed {
				o.Status = meta.EventDuplicate
			}
			out.Events[i] = o
		}
	}
	return out, nil
}

// complete marks appended keys done. It outlives the request's context: the events are
// appended whatever happens to the client. When it fails three times the claims lapse
// after Pending, and a retry after that may append again (the documented duplicate): it
// is logged.
func (in EventIngest) complete(st meta.Stream, claim uint64, done []meta.EventDone, window time.Duration) {
	if len(done) == 0 {
		return
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = in.Meta.CompleteEvents(ctx, meta.EventComplete{Namespace: st.Namespace, StreamID: st.ID, Claim: claim, Done: done, Window: window})
		cancel()
		if err == nil || errors.Is(err, meta.ErrInvalidArgument) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	if err != nil {
		log := in.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("CloudEvents complete failed: the appended events' claims lapse and a retry after that may append them again",
			"namespace", st.Namespace, "stream", st.Name, "events", len(done), "err", err)
	}
}

// release drops the claims of events whose append definitely failed, so a retry may
// append them at once (else they would lapse after Pending).
func (in EventIngest) release(st meta.Stream, claim uint64, at []int, keys []meta.EventKey) {
	if len(at) == 0 {
		return
	}
	ks := make([]meta.EventKey, len(at))
	for j, i := range at {
		ks[j] = keys[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = in.Meta.ReleaseEvents(ctx, meta.EventRelease{Namespace: st.Namespace, StreamID: st.ID, Claim: claim, Keys: ks})
}

// StatusName is the wire name of an outcome: appended, duplicate or in_flight.
func StatusName(s meta.EventStatus) string {
	if s == meta.EventClaimed {
		return "appended"
	}
	return s.String()
}

// DecodeEvents decodes an ingest body by its content type: structured or batch JSON,
// structured or batch protobuf, or HTTP binary mode when h carries ce-specversion. ok is
// false when the request is none of these (415).
func DecodeEvents(h http.Header, body []byte) (events []*cloudevents.Event, ok bool, err error) {
	ct := h.Get("Content-Type")
	var e *cloudevents.Event
	switch cloudevents.MediaType(ct) {
	case cloudevents.MediaJSON:
		e, err = cloudevents.DecodeJSON(body)
	case cloudevents.MediaBatchJSON:
		events, err = cloudevents.DecodeBatchJSON(body)
		return events, true, err
	case cloudevents.MediaProto:
		e, err = cloudevents.DecodeProto(body)
	case cloudevents.MediaBatchProto:
		events, err = cloudevents.DecodeBatchProto(body)
		return events, true, err
	default:
		if !cloudevents.HasBinaryHeaders(h) {
			return nil, false, nil
		}
		e, err = cloudevents.DecodeBinary(h, body)
	}
	if err != nil {
		return nil, true, err
	}
	return []*cloudevents.Event{e}, true, nil
}

// eventsAnswer is the JSON answer of an ingest.
type eventsAnswer struct {
	Events []eventAnswer `json:"events"`
	Token  string        `json:"token,omitempty"`
}

type eventAnswer struct {
	Status    string `json:"status"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (s *Server) ingestEvents(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streams.get(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return err
	}
	wr, ok := s.cfg.Writers[st.Class]
	if !ok {
		return badInput(400, streamapi.CodeUnsupportedClass, "stream %q has class %q, which this node does not serve", st.Name, st.Class)
	}
	if err := onlyParams(r.URL.Query(), "event ingest takes", "partition"); err != nil {
		return err
	}
	partition := int32(-1)
	if v := r.URL.Query().Get("partition"); v != "" {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 0 {
			return badInput(400, streamapi.CodeBadRequest, "query parameter partition=%q is not a partition number", v)
		}
		partition = int32(p)
	}
	if ct := cloudevents.MediaType(r.Header.Get("Content-Type")); !strings.HasPrefix(ct, "application/cloudevents") && !cloudevents.HasBinaryHeaders(r.Header) {
		return badInput(http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia,
			"Content-Type %q is not a CloudEvents format: send %s, %s, %s or %s, or binary mode with a ce-specversion header",
			r.Header.Get("Content-Type"), cloudevents.MediaJSON, cloudevents.MediaBatchJSON, cloudevents.MediaProto, cloudevents.MediaBatchProto)
	}
	body, err := s.readRaw(w, r)
	if err != nil {
		return err
	}
	events, ok, err := DecodeEvents(r.Header, body)
	if !ok {
		return badInput(http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia, "Content-Type %q is not a CloudEvents format", r.Header.Get("Content-Type"))
	}
	if err != nil {
		return badInput(400, CodeInvalidEvent, "%v", err)
	}
	if err := s.AdmitIngest(r.Context(), st.Namespace, len(body)); err != nil {
		return err
	}
	res, err := IngestEvents(r.Context(), EventIngest{Meta: s.cfg.Meta, Writer: wr, NodeID: s.cfg.NodeID, Config: s.cfg.CloudEvents,
		Limits: s.cfg.Limits, Now: s.cfg.Now, Logger: s.cfg.Logger}, st, events, partition)
	if err != nil {
		return err
	}
	ans := eventsAnswer{Events: make([]eventAnswer, len(res.Events))}
	appended := 0
	for i, o := range res.Events {
		ans.Events[i] = eventAnswer{Status: StatusName(o.Status), Partition: o.Partition, Offset: o.Offset}
		if o.Status == meta.EventClaimed {
			appended++
		}
	}
	if res.Token > 0 {
		ans.Token = FormatToken(res.Token)
	}
	s.m.records.Add(float64(appended))
	status := http.StatusOK
	if res.InFlight {
		w.Header().Set("Retry-After", strconv.Itoa(eventsInFlightRetryS))
		status = http.StatusConflict
	}
	writeJSON(w, status, ans)
	return nil
}

// ledgerAnswer maps a claim over the namespace's ledger cap: 429, retriable.
func ledgerAnswer(err error) (answer, bool) {
	if !errors.Is(err, meta.ErrEventLedgerFull) {
		return answer{}, false
	}
	return retriable(http.StatusTooManyRequests, CodeDedupLedgerFull), true
}

func (s *Server) consumeEvents(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streams.get(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return err
	}
	pv := r.PathValue("p")
	p, err := strconv.ParseInt(pv, 10, 32)
	if err != nil {
		return badInput(400, streamapi.CodeBadRequest, "partition %q is not an integer", pv)
	}
	if p < 0 || p >= int64(st.Partitions) {
		return badInput(404, streamapi.CodePartitionNotFound, "partition %d does not exist: stream %q has partitions 0..%d", p, st.Name, st.Partitions-1)
	}
	q := r.URL.Query()
	if err := onlyParams(q, "events take", "offset", "max_bytes", "max_wait_ms", "token", "mode"); err != nil {
		return err
	}
	mode := q.Get("mode")
	switch mode {
	case "", "structured", "binary":
	default:
		return badInput(400, streamapi.CodeBadRequest, "query parameter mode=%q: want structured or binary", mode)
	}
	offset, err := intParam(r, "offset", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	maxBytes, err := intParam(r, "max_bytes", DefaultFetchBytes, 1, MaxFetchBytes)
	if err != nil {
		return err
	}
	waitMs, err := intParam(r, "max_wait_ms", 0, 0, MaxWait.Milliseconds())
	if err != nil {
		return err
	}
	token, err := tokenParam(q.Get("token"))
	if err != nil {
		return err
	}
	wait := time.Duration(waitMs) * time.Millisecond
	if wait > 0 || token > 0 {
		until := time.Now().Add(max(wait, MinTokenWait) + s.cfg.Limits.PollWriteMargin)
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(until)
		_ = rc.SetWriteDeadline(until)
	}
	wait = AwaitToken(r.Context(), s.cfg.Reader, st, int32(p), token, wait)
	res, err := s.cfg.Reader.Fetch(r.Context(), st.ID, int32(p), offset, int(maxBytes), wait)
	if err != nil {
		return err
	}
	origin := cloudevents.Origin{StreamID: st.ID, Namespace: st.Namespace, Stream: st.Name, Partition: int32(p)}
	var stored []cloudevents.Stored
	var offsets []int64
	for _, b := range res.Batches {
		batch, _, err := recordbatch.Parse(b)
		if err != nil {
			return fmt.Errorf("events: stored batch: %w", err)
		}
		recs, err := batch.Records()
		if err != nil {
			return fmt.Errorf("events: stored batch at %d: %w", batch.BaseOffset, err)
		}
		for _, rc := range recs {
			off := batch.BaseOffset + int64(rc.OffsetDelta)
			if off < offset {
				continue
			}
			origin.Offset = off
			stored = append(stored, cloudevents.FromRecord(rc, origin))
			offsets = append(offsets, off)
			if mode == "binary" {
				break
			}
		}
		if mode == "binary" && len(stored) > 0 {
			break
		}
	}
	h := w.Header()
	if mode == "binary" {
		if len(stored) == 0 {
			h.Set(streamapi.HeaderNextOffset, strconv.FormatInt(res.NextOffset, 10))
			h.Set(streamapi.HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		h.Set(headerOffset, strconv.FormatInt(offsets[0], 10))
		h.Set(streamapi.HeaderNextOffset, strconv.FormatInt(offsets[0]+1, 10))
		h.Set(streamapi.HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
		body := cloudevents.SetBinary(h, stored[0].Event)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		s.m.fetched.Inc()
		return nil
	}
	setOffsetHeaders(h, res)
	buf := make([]byte, 0, 256+int(float64(sizeOf(res.Batches))*1.5))
	buf = append(buf, '[')
	for i, sv := range stored {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = cloudevents.AppendStoredJSON(buf, sv)
	}
	buf = append(buf, "]\n"...)
	h.Set("Content-Type", cloudevents.MediaBatchJSON)
	_, _ = w.Write(buf)
	s.m.fetched.Add(float64(len(stored)))
	return nil
}

// headerOffset is the offset of a binary-mode event answer.
const headerOffset = "Loam-Offset"

// IngestEventsTo runs IngestEvents on this node's writer of st's class and CloudEvents
// settings (the gRPC API's entry point).
func (s *Server) IngestEventsTo(ctx context.Context, st meta.Stream, events []*cloudevents.Event, partition int32) (EventsResult, error) {
	wr, ok := s.cfg.Writers[st.Class]
	if !ok {
		return EventsResult{}, badInput(400, streamapi.CodeUnsupportedClass, "stream %q has class %q, which this node does not serve", st.Name, st.Class)
	}
	return IngestEvents(ctx, EventIngest{Meta: s.cfg.Meta, Writer: wr, NodeID: s.cfg.NodeID, Config: s.cfg.CloudEvents,
		Limits: s.cfg.Limits, Now: s.cfg.Now, Logger: s.cfg.Logger}, st, events, partition)
}

// DescribeError is how the HTTP API answers err: its status and error detail (code,
// message, retriable). The gRPC API maps IngestEvents' errors with it.
func DescribeError(err error) (int, streamapi.ErrorDetail) {
	a := errorAnswer(err)
	return a.status, a.detail
}

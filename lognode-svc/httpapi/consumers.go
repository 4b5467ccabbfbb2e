package httpapi

// Named consumers over HTTP (docs/consumers.md):
//
//	GET  /v1/namespaces/{ns}/consumers                   -> {"consumers": [...]}
//	GET  /v1/namespaces/{ns}/consumers/{name}            -> offsets, leases, lag, members
//	POST /v1/namespaces/{ns}/consumers/{name}/heartbeat  {"stream","member","session_ms","leave"} -> the member's leases
//	POST /v1/namespaces/{ns}/consumers/{name}/offsets    {"stream","member","offsets":[...]} -> {}
//
// The state lives in the sequencer (meta.Client's consumer methods); a log node only
// translates. /metrics carries the lag of each partition a consumer committed on
// (lagCollector).

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/prometheus/client_golang/prometheus"
)

// routeConsumers registers the consumer routes and the lag collector.
func (s *Server) routeConsumers() {
	const consumers = "/v1/namespaces/{ns}/consumers"
	const consumer = consumers + "/{name}"
	s.handle("GET "+consumers, s.listConsumers)
	s.handle("GET "+consumer, s.describeConsumer)
	s.handle("POST "+consumer+"/heartbeat", s.consumerHeartbeat)
	s.handle("POST "+consumer+"/offsets", s.commitOffsets)
	for _, p := range []string{consumers, consumer, consumer + "/heartbeat", consumer + "/offsets"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusMethodNotAllowed, streamapi.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
		})
	}
	s.cfg.Registry.MustRegister(&lagCollector{meta: s.cfg.Meta, max: maxLagSeries, timeout: 2 * time.Second})
}

// consumerErr maps the consumer sentinels to their answers; every other error goes to
// errorAnswer unchanged.
func consumerErr(err error) error {
	switch {
	case errors.Is(err, meta.ErrStaleConsumerEpoch):
		return badInput(http.StatusConflict, streamapi.CodeStaleConsumerEpoch, "%s", err.Error())
	case errors.Is(err, meta.ErrConsumerNotFound):
		return badInput(http.StatusNotFound, streamapi.CodeConsumerNotFound, "%s", err.Error())
	case errors.Is(err, meta.ErrOffsetOutOfRange): // a commit past the high watermark
		return badInput(http.StatusRequestedRangeNotSatisfiable, streamapi.CodeOffsetOutOfRange, "%s", err.Error())
	}
	return err
}

func (s *Server) listConsumers(w http.ResponseWriter, r *http.Request) error {
	names, err := s.cfg.Meta.ListConsumers(r.Context(), r.PathValue("ns"))
	if err != nil {
		return consumerErr(err)
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(w, http.StatusOK, streamapi.ConsumerList{Consumers: names})
	return nil
}

func (s *Server) describeConsumer(w http.ResponseWriter, r *http.Request) error {
	d, err := DescribeConsumer(r.Context(), s.cfg.Meta, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		return consumerErr(err)
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// DescribeConsumer is a consumer's state with each partition's lag, from one
// DescribeConsumer and one GetStream per stream (a stream deleted in between is left out).
// The gRPC API answers the same.
func DescribeConsumer(ctx context.Context, mc meta.Client, ns, name string) (streamapi.ConsumerDescription, error) {
	st, err := mc.DescribeConsumer(ctx, ns, name)
	if err != nil {
		return streamapi.ConsumerDescription{}, err
	}
	d := streamapi.ConsumerDescription{Name: name, ClockMs: st.ClockMs, Partitions: []streamapi.ConsumerPartition{},
		Members: make([]streamapi.ConsumerMember, 0, len(st.Members))}
	type state struct {
		id    uint64
		parts []meta.PartitionState
	}
	streams := map[string]*state{}
	for _, p := range st.Partitions {
		ps, ok := streams[p.Stream]
		if !ok {
			ps = &state{}
			s, parts, err := mc.GetStream(ctx, ns, p.Stream)
			switch {
			case errors.Is(err, meta.ErrStreamNotFound):
			case err != nil:
				return d, err
			default:
				ps.id, ps.parts = s.ID, parts
			}
			streams[p.Stream] = ps
		}
		if ps.id != p.StreamID || int(p.Partition) >= len(ps.parts) {
			continue // deleted (and perhaps recreated under the name) meanwhile
		}
		part := ps.parts[p.Partition]
		d.Partitions = append(d.Partitions, streamapi.ConsumerPartition{Stream: p.Stream, Partition: p.Partition, Committed: p.Committed,
			Metadata: p.Metadata, CommittedMs: p.CommittedMs, HighWatermark: part.HighWatermark, LogStart: part.LogStart,
			Lag: lag(p.Committed, part), Holder: p.Holder, Epoch: p.Epoch, LeaseExpiresMs: p.LeaseExpiresMs})
	}
	for _, m := range st.Members {
		d.Members = append(d.Members, streamapi.ConsumerMember{Stream: m.Stream, Member: m.Member, ExpiresMs: m.ExpiresMs})
	}
	return d, nil
}

// lag is the records of the partition not yet consumed: from the committed offset (or the
// log start, when nothing was committed or the committed offset was trimmed away) to the
// high watermark.
func lag(committed int64, p meta.PartitionState) int64 {
	return max(0, p.HighWatermark-max(committed, p.LogStart))
}

func (s *Server) consumerHeartbeat(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.HeartbeatRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Stream == "" || req.Member == "" {
		return badInput(http.StatusBadRequest, streamapi.CodeInvalidArgument, `a heartbeat names its "stream" and "member"`)
	}
	if req.SessionMs == 0 && !req.Leave {
		req.SessionMs = meta.DefaultConsumerSession.Milliseconds()
	}
	if !req.Leave && (req.SessionMs < meta.MinConsumerSession.Milliseconds() || req.SessionMs > meta.MaxConsumerSession.Milliseconds()) {
		return badInput(http.StatusBadRequest, streamapi.CodeInvalidArgument, `"session_ms" %d: want %d..%d`, req.SessionMs,
			meta.MinConsumerSession.Milliseconds(), meta.MaxConsumerSession.Milliseconds())
	}
	a, err := s.cfg.Meta.ConsumerHeartbeat(r.Context(), meta.ConsumerHeartbeat{Namespace: r.PathValue("ns"), Consumer: r.PathValue("name"),
		Stream: req.Stream, Member: req.Member, Session: time.Duration(req.SessionMs) * time.Millisecond, Leave: req.Leave})
	if err != nil {
		return consumerErr(err)
	}
	out := streamapi.Assignment{StreamID: a.StreamID, Partitions: a.Partitions, Members: a.Members, ExpiresMs: a.ExpiresMs,
		Leases: make([]streamapi.Lease, len(a.Leases))}
	if !req.Leave {
		out.ClockMs = a.ExpiresMs - req.SessionMs
	}
	for i, l := range a.Leases {
		out.Leases[i] = streamapi.Lease{Partition: l.Partition, Epoch: l.Epoch, ExpiresMs: l.ExpiresMs}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) commitOffsets(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.CommitOffsetsRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Stream == "" || len(req.Offsets) == 0 {
		return badInput(http.StatusBadRequest, streamapi.CodeInvalidArgument, `a commit names its "stream" and at least one of "offsets"`)
	}
	c := meta.ConsumerCommit{Namespace: r.PathValue("ns"), Consumer: r.PathValue("name"), Stream: req.Stream, Member: req.Member,
		Offsets: make([]meta.ConsumerOffset, len(req.Offsets))}
	for i, o := range req.Offsets {
		c.Offsets[i] = meta.ConsumerOffset{Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, Epoch: o.Epoch}
	}
	if err := meta.CheckConsumerCommit(c); err != nil {
		return err
	}
	if err := s.cfg.Meta.CommitConsumerOffsets(r.Context(), c); err != nil {
		return consumerErr(err)
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// maxLagSeries bounds the loam_consumer_lag series one scrape reports.
const maxLagSeries = 1000

var (
	lagDesc = prometheus.NewDesc("loam_consumer_lag", "Records of a partition not yet consumed by a named consumer (high watermark - committed).",
		[]string{"namespace", "consumer", "stream", "partition"}, nil)
	lagDroppedDesc = prometheus.NewDesc("loam_consumer_lag_series_dropped",
		"Consumer partitions left out of loam_consumer_lag by its series cap in this scrape.", nil, nil)
)

// lagCollector reports, at each scrape, the lag of every partition of every named
// consumer of every namespace, read from the sequencer within timeout. Label cardinality is
// bounded: at most max series (namespaces, consumers and partitions in name order), the
// partitions past the cap counted in loam_consumer_lag_series_dropped. Every log node
// answers the same figures.
type lagCollector struct {
	meta    meta.Client
	max     int
	timeout time.Duration
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- lagDroppedDesc
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	n, dropped := 0, 0
	namespaces, err := c.meta.ListNamespaces(ctx)
	if err != nil {
		return
	}
	for _, ns := range namespaces {
		names, err := c.meta.ListConsumers(ctx, ns)
		if err != nil {
			continue
		}
		for _, name := range names {
			if n >= c.max {
				// Count what is left out without reading every consumer: one more
				// describe per consumer is the same cost as reporting it.
				st, err := c.meta.DescribeConsumer(ctx, ns, name)
				if err == nil {
					dropped += countCommitted(st)
				}
				continue
			}
			d, err := DescribeConsumer(ctx, c.meta, ns, name)
			if err != nil {
				continue
			}
			for _, p := range d.Partitions {
				if p.Committed < 0 {
					continue
				}
				if n >= c.max {
					dropped++
					continue
				}
				n++
				ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(p.Lag), ns, name, p.Stream, strconv.Itoa(int(p.Partition)))
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(lagDroppedDesc, prometheus.GaugeValue, float64(dropped))
}

func countCommitted(st meta.ConsumerState) int {
	n := 0
	for _, p := range st.Partitions {
		if p.Committed >= 0 {
			n++
		}
	}
	return n
}

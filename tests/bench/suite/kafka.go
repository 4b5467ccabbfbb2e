package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaRows measures the Kafka gateway rows: kgo producer and consumer against Loam's Kafka
// gateway and against kfake, in turn per repetition (1 KiB records, 16 partitions, linger
// 5 ms, acks=all), then the gateway's produce latency in an open loop at s.latFraction of
// the produce request rate Loam reached (zero-latency bucket), as a ratio to the flush
// interval.
func (s *suite) kafkaRows(ctx context.Context) ([]Row, error) {
	kw := s.w
	kw.Partitions = 16
	var kLoamProd, kLoamFetch, kFakeProd, kFakeFetch []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("kafka, repetition %d: loam", s.rep)
		l, err := s.startLoam(ctx, "kafka", "none")
		if err != nil {
			return nil, err
		}
		p, f, err := kafkaRow(ctx, l.kafka, kw, s.dur, s.fetchRecs, true)
		if _, serr := l.stopLoam(); err == nil {
			err = serr
		}
		if err != nil {
			return nil, fmt.Errorf("suite: loam kafka: %w", err)
		}
		kLoamProd, kLoamFetch = append(kLoamProd, p), append(kLoamFetch, f)

		s.progress("kafka, repetition %d: kfake", s.rep)
		kc, addr, err := s.startKfake(ctx, "kafka", kw.Partitions)
		if err != nil {
			return nil, err
		}
		p, f, err = kafkaRow(ctx, addr, kw, s.dur, s.fetchRecs, false)
		kc.stop()
		if err != nil {
			return nil, fmt.Errorf("suite: kfake kafka: %w", err)
		}
		kFakeProd, kFakeFetch = append(kFakeProd, p), append(kFakeFetch, f)
	}
	kLoamProd, kLoamFetch, kFakeProd, kFakeFetch = s.measuredReps(kLoamProd), s.measuredReps(kLoamFetch), s.measuredReps(kFakeProd), s.measuredReps(kFakeFetch)

	// Latency: ProduceSync requests of kw.PerReq records at s.latFraction of the request
	// rate the closed loop reached.
	rate := s.latFraction * median(kLoamProd) * 1e6 / float64(kw.PerReq*kw.Size)
	var p50, p99 []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("kafka produce latency, repetition %d: loam, %.0f requests/s", s.rep, rate)
		l, err := s.startLoam(ctx, "kafka-latency", "none")
		if err != nil {
			return nil, err
		}
		h, errs, err := kafkaLatency(ctx, l.kafka, kw, rate, s.latDur)
		if _, serr := l.stopLoam(); err == nil {
			err = serr
		}
		if err == nil && errs > 0 {
			err = fmt.Errorf("%d requests failed or could not be sent", errs)
		}
		if err != nil {
			return nil, fmt.Errorf("suite: kafka produce latency: %w", err)
		}
		p50, p99 = append(p50, float64(h.ValueAtQuantile(50))/1000), append(p99, float64(h.ValueAtQuantile(99))/1000)
	}
	p50, p99 = s.measuredReps(p50), s.measuredReps(p99)
	flushMs := make([]float64, len(p99))
	for i := range flushMs {
		flushMs[i] = float64(s.flush) / float64(time.Millisecond)
	}

	kfake := func(r Row) Row { r.Peer = "kfake"; return r }
	goal := func(r Row, op string, x float64) Row { r.Goal = &Goal{OnRatio: true, Op: op, X: x}; return r }
	note := func(r Row, n string) Row { r.Note = n; return r }
	kafkaNote := fmt.Sprintf("kgo ProduceSync of %d records of %d B, %d workers, 16 partitions, linger 5 ms, acks=all", kw.PerReq, kw.Size, kw.Conc)
	lat := measured(secLatency, "Kafka produce p99 (kgo → Loam's Kafka gateway), zero-latency bucket", "ms", p99, flushMs)
	lat.Limit = "flush interval"
	lat = note(lat, fmt.Sprintf("p50 %s ms; open loop at %.0f %% of the Kafka produce rate (%.0f requests/s of %d records)", num(median(p50)), 100*s.latFraction, rate, kw.PerReq))
	return []Row{
		goal(note(kfake(measured(secProduce, "Kafka produce MB/s (kgo → Loam's Kafka gateway)", "MB/s", kLoamProd, kFakeProd)), kafkaNote), ">=", 0.7),
		goal(note(kfake(measured(secFetch, "Kafka fetch MB/s (kgo ← Loam's Kafka gateway)", "MB/s", kLoamFetch, kFakeFetch)), "a new kgo consumer from offset 0, 16 partitions: MB/s of record values"), ">=", 1.0),
		goal(lat, "<=", 1.3),
	}, nil
}

// kafkaLatency creates topic "latency" on the broker at addr, warms the path with one
// request, then sends ProduceSync requests of w.PerReq records (linger 5 ms, acks=all) in
// an open loop at rate per second for dur.
func kafkaLatency(ctx context.Context, addr string, w workload, rate float64, dur time.Duration) (*hdrhistogram.Histogram, int, error) {
	if err := kafkaCreate(ctx, addr, "latency", w.Partitions); err != nil {
		return nil, 0, err
	}
	cl, err := kgoClient(addr, kgo.DefaultProduceTopic("latency"), kgo.ProducerLinger(5*time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	payload := bytes.Repeat([]byte("x"), w.Size)
	if err := cl.ProduceSync(ctx, kafkaRecords(w, payload, 0)...).FirstErr(); err != nil {
		return nil, 0, err
	}
	return openLoop(ctx, rate, dur, 100_000, func(ctx context.Context, i int) error {
		return cl.ProduceSync(ctx, kafkaRecords(w, payload, i)...).FirstErr()
	})
}

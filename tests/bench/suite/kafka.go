package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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
	var cLoamProd, cLoamFetch, cFakeProd, cFakeFetch []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("kafka, repetition %d: loam", s.rep)
		l, err := s.startLoam(ctx, "kafka", "none")
		if err != nil {
			return nil, err
		}
		r, err := kafkaRow(ctx, l.kafka, l.cmd.Process.Pid, kw, s.dur, s.kafkaFetchRecs, true)
		if _, serr := l.stopLoam(); err == nil {
			err = serr
		}
		if err != nil {
			return nil, fmt.Errorf("suite: loam kafka: %w", err)
		}
		kLoamProd, kLoamFetch = append(kLoamProd, r.prodMB), append(kLoamFetch, r.fetchMB)
		cLoamProd, cLoamFetch = append(cLoamProd, r.prodCPU), append(cLoamFetch, r.fetchCPU)

		s.progress("kafka, repetition %d: kfake", s.rep)
		kc, addr, err := s.startKfake(ctx, "kafka", kw.Partitions)
		if err != nil {
			return nil, err
		}
		r, err = kafkaRow(ctx, addr, kc.cmd.Process.Pid, kw, s.dur, s.kafkaFetchRecs, false)
		kc.stop()
		if err != nil {
			return nil, fmt.Errorf("suite: kfake kafka: %w", err)
		}
		kFakeProd, kFakeFetch = append(kFakeProd, r.prodMB), append(kFakeFetch, r.fetchMB)
		cFakeProd, cFakeFetch = append(cFakeProd, r.prodCPU), append(cFakeFetch, r.fetchCPU)
	}
	kLoamProd, kLoamFetch, kFakeProd, kFakeFetch = s.measuredReps(kLoamProd), s.measuredReps(kLoamFetch), s.measuredReps(kFakeProd), s.measuredReps(kFakeFetch)
	cLoamProd, cLoamFetch, cFakeProd, cFakeFetch = s.measuredReps(cLoamProd), s.measuredReps(cLoamFetch), s.measuredReps(cFakeProd), s.measuredReps(cFakeFetch)

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
	cpuNote := "server process CPU (user + system, 10 ms ticks) per GB of record values; less load-sensitive than MB/s: informational"
	cpuRow := func(section, name string, loam, fake []float64) Row {
		for _, v := range append(slices.Clone(loam), fake...) {
			if v <= 0 {
				return skipped(section, name, "s/GB", "a run counted no CPU tick: too short to measure")
			}
		}
		return note(kfake(measured(section, name, "s/GB", loam, fake)), cpuNote)
	}
	return []Row{
		goal(note(kfake(measured(secProduce, "Kafka produce MB/s (kgo → Loam's Kafka gateway)", "MB/s", kLoamProd, kFakeProd)), kafkaNote), ">=", 0.7),
		cpuRow(secProduce, "Kafka produce CPU s/GB (kgo → Loam's Kafka gateway)", cLoamProd, cFakeProd),
		goal(note(kfake(measured(secFetch, "Kafka fetch MB/s (kgo ← Loam's Kafka gateway)", "MB/s", kLoamFetch, kFakeFetch)), fmt.Sprintf("%d new kgo consumers in turn, each reading all %d records from offset 0, 16 partitions: MB/s of record values", kafkaFetchReads, s.kafkaFetchRecs)), ">=", 1.0),
		cpuRow(secFetch, "Kafka fetch CPU s/GB (kgo ← Loam's Kafka gateway)", cLoamFetch, cFakeFetch),
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

// kafkaFetchReads is how many times the Kafka fetch row reads its topic.
const kafkaFetchReads = 5

// kafkaResult is one Kafka row pair's figures: MB/s, and the broker process's CPU seconds
// per GB of record values.
type kafkaResult struct {
	prodMB, fetchMB, prodCPU, fetchCPU float64
}

// kafkaRow measures one Kafka row pair on the broker at addr (process pid): kgo
// ProduceSync throughput for dur (linger 5 ms, acks=all, w.Partitions partitions of topic
// "bench"), then a fresh consumer reading records records from offset 0 of topic "fetch".
// create makes both topics first with CreateTopics (kfake seeds "bench" itself, and makes
// "fetch" too).
func kafkaRow(ctx context.Context, addr string, pid int, w workload, dur time.Duration, records int, create bool) (kafkaResult, error) {
	topics := []string{"fetch"}
	if create {
		topics = append(topics, "bench")
	}
	for _, topic := range topics {
		if err := kafkaCreate(ctx, addr, topic, w.Partitions); err != nil {
			return kafkaResult{}, err
		}
	}
	perGB := func(cpu time.Duration, bytes int64) float64 {
		if bytes <= 0 {
			return 0
		}
		return cpu.Seconds() / (float64(bytes) / 1e9)
	}
	lingerAll := []kgo.Opt{kgo.ProducerLinger(5 * time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks())}
	cl, err := kgoClient(addr, lingerAll...)
	if err != nil {
		return kafkaResult{}, err
	}
	payload := bytes.Repeat([]byte("x"), w.Size)
	c0 := procCPU(pid)
	t, err := closedLoop(ctx, w, dur, func(ctx context.Context, wk, i int) error {
		return cl.ProduceSync(ctx, kafkaRecords(w, payload, wk*1_000_003+i)...).FirstErr()
	})
	cl.Close()
	if err != nil {
		return kafkaResult{}, fmt.Errorf("produce: %w", err)
	}
	r := kafkaResult{prodMB: t.mbps(), prodCPU: perGB(procCPU(pid)-c0, t.Bytes)}
	want, err := kafkaFill(ctx, addr, "fetch", w, records, lingerAll...)
	if err != nil {
		return kafkaResult{}, fmt.Errorf("fetch: %w", err)
	}
	// The topic is read kafkaFetchReads times, each by a new consumer from offset 0, so the
	// read lasts long enough to time (and to count CPU ticks of) on a busy machine.
	var n int64
	var el time.Duration
	c0 = procCPU(pid)
	for range kafkaFetchReads {
		ni, eli, err := kafkaConsume(ctx, addr, "fetch", want)
		if err != nil {
			return kafkaResult{}, fmt.Errorf("fetch: %w", err)
		}
		n, el = n+ni, el+eli
	}
	r.fetchMB, r.fetchCPU = float64(n)/el.Seconds()/1e6, perGB(procCPU(pid)-c0, n)
	return r, nil
}

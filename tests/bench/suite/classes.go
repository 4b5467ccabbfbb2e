package main

import (
	"context"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/loamhq/loam/shared/streamapi"
)

// classRate is the request rate of the express and quorum latency rows: one record of the
// produce workload's size per request (a latency-bound producer), each to the next
// partition, at a fixed rate well inside what a journal takes on the real disk, so the
// rows show each class's write path rather than its saturation or JSON's cost.
const classRate = 200.0

// classRun is one durability-class latency row's setup: the stream class, and where the
// server's data directory (the journal members' fsynced logs) lives.
type classRun struct {
	name, class string
	tmpfs       bool
}

var classRuns = []classRun{
	{"express", "express", true},
	{"quorum-tmpfs", "quorum", true},
	{"quorum-disk", "quorum", false},
}

// classLatencies measures produce p50/p99 of the express class (its zonal buckets are
// directories of the data dir, on tmpfs: no PUT latency, as the zero-latency bucket of the
// standard rows; 5 ms flush) and the quorum class (three in-process journal
// members, logs fsynced, on tmpfs and on the real disk), per run of classRuns, in an open
// loop at classRate on a zero-latency bucket.
func (s *suite) classLatencies(ctx context.Context) (p50, p99 [][]float64, err error) {
	p50, p99 = make([][]float64, len(classRuns)), make([][]float64, len(classRuns))
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		for i, cr := range classRuns {
			s.progress("produce latency, repetition %d: loam, class %s, %.0f requests/s", s.rep, cr.name, classRate)
			parent, extra := s.work, []string{}
			if cr.class == "quorum" {
				extra = append(extra, "-quorum")
			}
			if cr.tmpfs {
				parent = s.shm
			}
			l, err := s.startLoamIn(ctx, "latency-"+cr.name, "none", parent, extra...)
			if err != nil {
				return nil, nil, err
			}
			h, errs, err := s.classLatency(ctx, l, cr.class)
			if _, serr := l.stopLoam(); err == nil {
				err = serr
			}
			if err == nil && errs > 0 {
				err = fmt.Errorf("%d requests failed or could not be sent", errs)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("suite: latency (class %s): %w", cr.name, err)
			}
			p99[i] = append(p99[i], float64(h.ValueAtQuantile(99))/1000)
			p50[i] = append(p50[i], float64(h.ValueAtQuantile(50))/1000)
		}
	}
	for i := range classRuns {
		p50[i], p99[i] = s.measuredReps(p50[i]), s.measuredReps(p99[i])
	}
	return p50, p99, nil
}

func (s *suite) classLatency(ctx context.Context, l *loamServer, class string) (h *hdrhistogram.Histogram, errs int, err error) {
	api, err := streamapi.NewClient(l.base, streamapi.WithTimeout(time.Minute))
	if err != nil {
		return nil, 0, err
	}
	p := int32(s.w.Partitions)
	if _, err := api.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "c", Partitions: &p, Class: class}); err != nil {
		return nil, 0, err
	}
	bodies := loamBodies(workload{Size: s.w.Size, PerReq: 1, Partitions: s.w.Partitions}, 64)
	url := recordsURL(l.base, "c")
	for range 3 { // warm the path (connections, the journal's leader)
		if err := loamPost(ctx, url, bodies[0]); err != nil {
			return nil, 0, err
		}
	}
	return openLoop(ctx, classRate, s.latDur, 100_000, func(ctx context.Context, i int) error {
		return loamPost(ctx, url, bodies[i%len(bodies)])
	})
}

// classRows are the express and quorum latency rows of classLatencies' figures;
// fsync4K99 is the calibration's 4 KiB write+fsync p99 per repetition.
func (s *suite) classRows(p50, p99 [][]float64, fsync4K99 []float64) []Row {
	var rows []Row
	for i, cr := range classRuns {
		name := "produce p99, " + cr.class + " class"
		note := fmt.Sprintf("p50 %s ms; HTTP/JSON, %.0f requests/s of 1 record of %d B", num(median(p50[i])), classRate, s.w.Size)
		var r Row
		switch cr.name {
		case "express":
			r = measured(secLatency, name, "ms", p99[i], repeated(5, len(fsync4K99)))
			r.Limit, r.Goal = "express flush interval (5 ms)", &Goal{OnRatio: true, Op: "<=", X: 1.3}
			note += "; zonal buckets are directories on tmpfs (no PUT latency)"
		case "quorum-tmpfs":
			r = measured(secLatency, name+", journals on tmpfs", "ms", p99[i], nil)
			r.Goal = &Goal{Op: "<=", X: 10}
			note += "; three in-process journal members, Raft logs fsynced on /dev/shm"
		case "quorum-disk":
			r = measured(secLatency, name+", journals on the real disk", "ms", p99[i], fsync4K99)
			r.Limit = "4 KiB write+fsync p99"
			note += "; informational: two fsyncs in a row on the critical path"
		}
		r.Note = note
		rows = append(rows, r)
	}
	return rows
}

// classesOnly runs the calibration and the class latency rows (-only classes).
func (s *suite) classesOnly(ctx context.Context) ([]Row, error) {
	var fsync []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("calibrate, repetition %d", s.rep)
		c, err := s.calibrate(ctx, s.work)
		if err != nil {
			return nil, err
		}
		fsync = append(fsync, c.Fsync4KP99)
	}
	p50, p99, err := s.classLatencies(ctx)
	if err != nil {
		return nil, err
	}
	return s.classRows(p50, p99, s.measuredReps(fsync)), nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// binaryRows (-only binary) measures the Go client's produce rows alone: loopback TCP
// calibration, then the binary path and gRPC interleaved with the NATS batch peer. With
// -cpuprofile it also profiles this process (the load generator) during the Loam runs.
func (s *suite) binaryRows(ctx context.Context) ([]Row, error) {
	var loop, natsMB []float64
	clientMB := map[string][]float64{}
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("binary rows, repetition %d: calibrate", s.rep)
		c, err := s.calibrate(ctx, s.work)
		if err != nil {
			return nil, err
		}
		loop = append(loop, c.LoopbackMBps)
		if err := s.clientProduceAll(ctx, clientMB); err != nil {
			return nil, err
		}
		s.progress("binary rows, repetition %d: nats, %d per batch", s.rep, s.wBatch.PerReq)
		nc, url, err := s.startNATS(ctx, "produce-batch", s.shm) // as the Go client rows' bucket (startLoamFiles)
		if err != nil {
			return nil, err
		}
		t, err := natsProduce(ctx, url, s.wBatch, s.dur)
		nc.stop()
		if err != nil {
			return nil, fmt.Errorf("suite: nats produce (batch %d): %w", s.wBatch.PerReq, err)
		}
		natsMB = append(natsMB, t.mbps())
	}
	loop, natsMB = s.measuredReps(loop), s.measuredReps(natsMB)
	for k, v := range clientMB {
		clientMB[k] = s.measuredReps(v)
	}
	nats := func(r Row) Row { r.Peer = "NATS JetStream"; return r }
	limit := func(r Row, l string) Row { r.Limit = l; return r }
	note := func(r Row, n string) Row { r.Note = n; return r }
	goal := func(r Row, onRatio bool, op string, x float64) Row {
		r.Goal = &Goal{OnRatio: onRatio, Op: op, X: x}
		return r
	}
	return []Row{
		measured(secCal, "loopback TCP, one stream, load CPU → server CPU", "MB/s", loop, nil),
		note(measured(secPeers, fmt.Sprintf("NATS JetStream produce, async publish, %d per batch", s.wBatch.PerReq), "MB/s", natsMB, nil), "the peer of the Go client rows"),
		goal(nats(measured(secProduce, "produce MB/s, Go client, binary path", "MB/s", clientMB["binary"], natsMB)), true, ">=", 1.5),
		goal(limit(measured(secProduce, "produce MB/s, Go client, binary path vs loopback", "MB/s", clientMB["binary"], loop), "loopback TCP"), true, ">=", 0.1),
		goal(nats(measured(secProduce, "produce MB/s, Go client, gRPC", "MB/s", clientMB["grpc"], natsMB)), true, ">=", 0.8),
		colocatedRow(clientMB["binary-colocated"], natsMB),
	}, nil
}

// clientProduceAll runs the Go client produce rows once each (clientProduce), appending
// their MB/s to mb under "binary", "grpc" and "binary-colocated".
func (s *suite) clientProduceAll(ctx context.Context, mb map[string][]float64) error {
	for _, r := range []struct {
		key, surf string
		colocated bool
	}{{"binary", "binary", false}, {"grpc", "grpc", false}, {"binary-colocated", "binary", true}} {
		s.progress("repetition %d: loam, Go client, %s", s.rep, r.key)
		v, err := s.clientProduce(ctx, r.surf, r.colocated)
		if err != nil {
			return err
		}
		mb[r.key] = append(mb[r.key], v)
	}
	return nil
}

// colocatedRow is the binary path's produce row with the background functions in the
// server's process, on its CPU, as `loam dev` runs them (startLoamFiles).
func colocatedRow(mb, nats []float64) Row {
	r := measured(secProduce, "produce MB/s, Go client, binary path, functions on the server's CPU", "MB/s", mb, nats)
	r.Peer = "NATS JetStream"
	r.Note = "as loam dev runs them; the rows above run them on the load generator's CPU, as a deployment runs them off the log node"
	return r
}

// profileSelf starts a CPU profile of this process when -cpuprofile is set and returns
// the function that stops it.
func (s *suite) profileSelf(row string) func() {
	if !s.cpuprofile {
		return func() {}
	}
	dir := filepath.Join(s.out, "profiles")
	os.MkdirAll(dir, 0o755)
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s.load.rep%d.cpu.pprof", row, s.rep)))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// saveMetrics writes the server's /metrics to DIR/profiles/ when -cpuprofile is set, so
// a profile can be read next to the write path's PUT and commit latencies.
func (s *suite) saveMetrics(l *loamServer, row string) {
	if !s.cpuprofile {
		return
	}
	resp, err := httpc.Get(l.base + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return
	}
	os.WriteFile(filepath.Join(s.out, "profiles", fmt.Sprintf("%s.loam.rep%d.metrics.txt", row, s.rep)), b, 0o644)
}

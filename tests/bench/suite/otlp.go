package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// OTLP logs ingest rows: log records per second over OTLP/gRPC and OTLP/HTTP (protobuf),
// each beside native produce of the same 1 KiB values over the same transport in the same
// repetition (native gRPC: streamapi.GRPCClient; native HTTP: the binary path), and the
// server's CPU per 1,000 records. Each request carries wBatch.PerReq records: one
// ExportLogsServiceRequest of that many LogRecords (one resource, one scope), or one
// native produce call to one partition. otel_logs is created with the native rows'
// partition count first.

// otlpRequest is an export of w.PerReq LogRecords with w.Size-byte string bodies.
func otlpRequest(w workload) *collogspb.ExportLogsServiceRequest {
	body := strings.Repeat("x", w.Size)
	now := uint64(time.Now().UnixNano())
	lrs := make([]*logspb.LogRecord, w.PerReq)
	for i := range lrs {
		lrs[i] = &logspb.LogRecord{TimeUnixNano: now + uint64(i), SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO, SeverityText: "INFO",
			Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: body}}}
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "bench"}}}}},
		ScopeLogs: []*logspb.ScopeLogs{{Scope: &commonpb.InstrumentationScope{Name: "suite"}, LogRecords: lrs}},
	}}}
}

// otlpProduce runs the closed loop over OTLP/gRPC (one connection) or OTLP/HTTP
// (protobuf, the suite's HTTP client).
func otlpProduce(ctx context.Context, l *loamServer, surface string, w workload, dur time.Duration) (throughput, error) {
	req := otlpRequest(w)
	switch surface {
	case "otlp-grpc":
		conn, err := grpc.NewClient(l.otlpGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			return throughput{}, err
		}
		defer conn.Close()
		c := collogspb.NewLogsServiceClient(conn)
		return closedLoop(ctx, w, dur, func(ctx context.Context, _, _ int) error {
			resp, err := c.Export(ctx, req)
			if err == nil && resp.GetPartialSuccess().GetRejectedLogRecords() > 0 {
				err = fmt.Errorf("suite: OTLP/gRPC rejected %d records: %s", resp.GetPartialSuccess().GetRejectedLogRecords(), resp.GetPartialSuccess().GetErrorMessage())
			}
			return err
		})
	case "otlp-http":
		body, err := proto.Marshal(req)
		if err != nil {
			return throughput{}, err
		}
		url := "http://" + l.otlpHTTP + "/v1/logs"
		return closedLoop(ctx, w, dur, func(ctx context.Context, _, _ int) error {
			hr, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			hr.Header.Set("Content-Type", "application/x-protobuf")
			resp, err := httpc.Do(hr)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("suite: OTLP/HTTP: %d %q", resp.StatusCode, b)
			}
			var out collogspb.ExportLogsServiceResponse
			if err := proto.Unmarshal(b, &out); err != nil || out.GetPartialSuccess().GetRejectedLogRecords() > 0 {
				return fmt.Errorf("suite: OTLP/HTTP answer %v: %v", &out, err)
			}
			return nil
		})
	}
	return throughput{}, fmt.Errorf("suite: surface %q", surface)
}

// procCPU is the user + system CPU time process pid has used (Linux /proc; 0 elsewhere).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / ticks
}

// otlpRows measures the OTLP rows.
func (s *suite) otlpRows(ctx context.Context) ([]Row, error) {
	surfaces := []string{"otlp-grpc", "grpc", "otlp-http", "binary"}
	rps := map[string][]float64{}
	cpu := map[string][]float64{}
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		for _, surf := range surfaces {
			s.progress("OTLP ingest, repetition %d: loam, %s", s.rep, surf)
			l, err := s.startLoam(ctx, "produce-"+surf, "none")
			if err != nil {
				return nil, err
			}
			var t throughput
			pid := l.cmd.Process.Pid
			if strings.HasPrefix(surf, "otlp-") {
				if err = loamCreate(ctx, l.base, "otel_logs", s.wBatch.Partitions); err == nil {
					c0 := procCPU(pid)
					t, err = otlpProduce(ctx, l, surf, s.wBatch, s.dur)
					cpu[surf] = append(cpu[surf], cpuPer1000(procCPU(pid)-c0, t.Records))
				}
			} else {
				c0 := procCPU(pid)
				t, err = loamClientProduce(ctx, l, surf, s.wBatch, s.dur)
				cpu[surf] = append(cpu[surf], cpuPer1000(procCPU(pid)-c0, t.Records))
			}
			if _, serr := l.stopLoam(); err == nil {
				err = serr
			}
			if err != nil {
				return nil, fmt.Errorf("suite: OTLP rows (%s): %w", surf, err)
			}
			rps[surf] = append(rps[surf], float64(t.Records)/t.Elapsed.Seconds())
		}
	}
	for _, surf := range surfaces {
		rps[surf], cpu[surf] = s.measuredReps(rps[surf]), s.measuredReps(cpu[surf])
	}
	peer := func(r Row, p string) Row { r.Peer = p; return r }
	note := func(r Row, n string) Row { r.Note = n; return r }
	goal := func(r Row, op string, x float64) Row { r.Goal = &Goal{OnRatio: true, Op: op, X: x}; return r }
	// CPU is counted in ticks of 10 ms: a short run (-short) may count none; then the
	// rows carry no ratio and 0 is accepted.
	cpuRow := func(name, surf, ref, peerName, n string) Row {
		refs := cpu[ref]
		for _, v := range append(refs, cpu[surf]...) {
			if v == 0 {
				refs = nil
			}
		}
		r := note(measured(secProduce, name, "ms", cpu[surf], refs), n)
		if refs != nil {
			r.Peer = peerName
		}
		r.zeroOK = true
		return r
	}
	per := fmt.Sprintf("%d LogRecords of %d B bodies per export, %d workers", s.wBatch.PerReq, s.wBatch.Size, s.wBatch.Conc)
	return []Row{
		goal(note(peer(measured(secProduce, "OTLP/gRPC log records/s", "records/s", rps["otlp-grpc"], rps["grpc"]), "native gRPC produce, same values"),
			per+"; one connection; each record's value is the LogRecord's OTLP/JSON with resource and scope"), ">=", 0.5),
		goal(note(peer(measured(secProduce, "OTLP/HTTP (protobuf) log records/s", "records/s", rps["otlp-http"], rps["binary"]), "native binary HTTP produce, same values"),
			per), ">=", 0.5),
		cpuRow("CPU per 1,000 logs, OTLP/gRPC", "otlp-grpc", "grpc", "native gRPC produce",
			"server process CPU (sequencer, log node, functions) per 1,000 records committed"),
		cpuRow("CPU per 1,000 logs, OTLP/HTTP (protobuf)", "otlp-http", "binary", "native binary HTTP produce",
			"server process CPU per 1,000 records committed"),
	}, nil
}

func cpuPer1000(d time.Duration, records int64) float64 {
	if records == 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond) * 1000 / float64(records)
}

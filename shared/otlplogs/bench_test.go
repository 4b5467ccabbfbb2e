package otlplogs_test

import (
	"strings"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/loamhq/loam/shared/otlplogs"
)

// BenchmarkMap maps an export of 500 LogRecords with 1 KiB bodies (the benchmark suite's
// OTLP request).
func BenchmarkMap(b *testing.B) {
	body := strings.Repeat("x", 1024)
	lrs := make([]*logspb.LogRecord, 500)
	for i := range lrs {
		lrs[i] = &logspb.LogRecord{TimeUnixNano: 1732870000000000000 + uint64(i), SeverityNumber: 9, SeverityText: "INFO", Body: str(body)}
	}
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  nil,
		ScopeLogs: []*logspb.ScopeLogs{{Scope: &commonpb.InstrumentationScope{Name: "suite"}, LogRecords: lrs}},
	}}}
	req.ResourceLogs[0].ScopeLogs[0].LogRecords[0].Attributes = []*commonpb.KeyValue{kv("service.name", str("bench"))}
	b.SetBytes(500 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		otlplogs.Map(req, otlplogs.Options{MaxRecordBytes: 1 << 20})
	}
}

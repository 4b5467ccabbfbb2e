package grpcapi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// wantStatus checks that err is a status of code c whose ErrorInfo has the given reason.
func wantStatus(t *testing.T, what string, err error, c codes.Code, reason string) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("%s: got %v, want a %v status", what, err, c)
	}
	if st.Code() != c {
		t.Fatalf("%s: code %v (%s), want %v", what, st.Code(), st.Message(), c)
	}
	if reason != "" {
		if got := reasonOf(st); got != reason {
			t.Fatalf("%s: reason %q (%s), want %q", what, got, st.Message(), reason)
		}
	}
	return st
}

func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.Reason
		}
	}
	return ""
}

func TestAdmin(t *testing.T) {
	e := start(t, httpapi.Limits{})
	c := ctx(t)
	st := e.createStream(t, "orders", 3)
	if st.Partitions != 3 || st.Class != "standard" || st.Encoding != "kafka" || st.CleanupPolicy != "delete" || st.RetentionBytes != -1 || st.Id == 0 {
		t.Fatalf("created %v", st)
	}
	_, err := e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "orders"})
	wantStatus(t, "create twice", err, codes.AlreadyExists, "stream_exists")
	_, err = e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "default"})
	wantStatus(t, "create without name", err, codes.InvalidArgument, "invalid_argument")
	_, err = e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x", RetentionMs: ptr[int64](0)})
	wantStatus(t, "retention 0", err, codes.InvalidArgument, "invalid_argument")
	_, err = e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "x", Class: "express"})
	wantStatus(t, "express", err, codes.InvalidArgument, "unsupported_class")
	_, err = e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "nope", Name: "x"})
	wantStatus(t, "missing namespace", err, codes.NotFound, "namespace_not_found")

	list, err := e.streams.ListStreams(c, &loamv1pb.ListStreamsRequest{Namespace: "default"})
	if err != nil || len(list.Streams) != 1 || list.Streams[0].Name != "orders" {
		t.Fatalf("list: %v %v", list, err)
	}
	got, err := e.streams.GetStream(c, &loamv1pb.GetStreamRequest{Namespace: "default", Name: "orders"})
	if err != nil || len(got.Stream.PartitionInfo) != 3 {
		t.Fatalf("get: %v %v", got, err)
	}
	up, err := e.streams.UpdateStream(c, &loamv1pb.UpdateStreamRequest{Namespace: "default", Name: "orders", Partitions: ptr[int32](5), RetentionMs: ptr[int64](-1)})
	if err != nil || up.Stream.Partitions != 5 || up.Stream.RetentionMs != -1 {
		t.Fatalf("update: %v %v", up, err)
	}
	// The shared catalog saw the change: a produce to partition 4 is accepted at once.
	if _, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "orders",
		Records: []*loamv1pb.Record{{Value: []byte("v"), Partition: ptr[int32](4)}}}); err != nil {
		t.Fatalf("produce to a new partition: %v", err)
	}
	ns, err := e.streams.ListNamespaces(c, &loamv1pb.ListNamespacesRequest{})
	if err != nil || !slices.Contains(ns.Namespaces, "default") {
		t.Fatalf("namespaces: %v %v", ns, err)
	}
	if _, err := e.streams.DeleteStream(c, &loamv1pb.DeleteStreamRequest{Namespace: "default", Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.streams.GetStream(c, &loamv1pb.GetStreamRequest{Namespace: "default", Name: "orders"})
	wantStatus(t, "get deleted", err, codes.NotFound, "stream_not_found")
	_, err = e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "orders", Records: []*loamv1pb.Record{{Value: []byte("v")}}})
	wantStatus(t, "produce to deleted", err, codes.NotFound, "stream_not_found")

	h, err := healthpb.NewHealthClient(e.conn).Check(c, &healthpb.HealthCheckRequest{Service: "loam.v1.RecordService"})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
}

// kafkaRecords are records as Kafka has them: null and empty keys and values, binary
// bytes, ordered and duplicate headers, a null header value.
func kafkaRecords() []*loamv1pb.Record {
	return []*loamv1pb.Record{
		{Key: []byte("k1"), Value: []byte(`{"id":1}`), TimestampMs: ptr[int64](1700000000000),
			Headers: []*loamv1pb.Header{{Key: "z", Value: []byte("1")}, {Key: "a", Value: []byte{0xff, 0}}, {Key: "z", Value: nil}, {Key: "e", Value: []byte{}}}},
		{Key: nil, Value: []byte{0, 1, 2, 0xfe}, TimestampMs: ptr[int64](1700000000001)},
		{Key: []byte{}, Value: nil, TimestampMs: ptr[int64](1700000000002)},
		{Key: []byte("k1"), Value: []byte{}, TimestampMs: ptr[int64](1700000000003)},
	}
}

func sameRecord(t *testing.T, i int, got, want *loamv1pb.Record) {
	t.Helper()
	eq := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	if !eq(got.Key, want.Key) || !eq(got.Value, want.Value) || got.GetTimestampMs() != want.GetTimestampMs() || len(got.Headers) != len(want.Headers) {
		t.Fatalf("record %d: got %v, want %v", i, got, want)
	}
	for j := range want.Headers {
		if got.Headers[j].Key != want.Headers[j].Key || !eq(got.Headers[j].Value, want.Headers[j].Value) {
			t.Fatalf("record %d header %d: got %v, want %v", i, j, got.Headers[j], want.Headers[j])
		}
	}
}

func TestProduceFetchRecords(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "s", 4)
	c := ctx(t)
	recs := kafkaRecords()
	for _, r := range recs {
		r.Partition = ptr[int32](2)
	}
	res, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "s", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Offsets) != 4 || res.Partial || !strings.HasPrefix(res.Token, "v1.") {
		t.Fatalf("produce answer %v", res)
	}
	for i, o := range res.Offsets {
		if o.Partition != 2 || o.Offset != int64(i) || o.Error != nil {
			t.Fatalf("offset %d: %v", i, o)
		}
	}
	f, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "s", Partition: 2, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f.NextOffset != 4 || f.HighWatermark != 4 || f.LogStart != 0 || len(f.Records) != 3 {
		t.Fatalf("fetch from 1: next %d hwm %d start %d, %d records", f.NextOffset, f.HighWatermark, f.LogStart, len(f.Records))
	}
	for i, r := range f.Records {
		if r.GetOffset() != int64(i+1) || r.GetPartition() != 2 {
			t.Fatalf("record %d: offset %d partition %d", i, r.GetOffset(), r.GetPartition())
		}
		sameRecord(t, i+1, r, recs[i+1])
	}

	// Keyed records without a partition go where Kafka's partitioner sends them; a
	// record without a timestamp gets the node's clock.
	before := time.Now().UnixMilli()
	res, err = e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "s", Records: []*loamv1pb.Record{{Key: []byte("user-7"), Value: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := httpapi.KeyPartition([]byte("user-7"), 4); res.Offsets[0].Partition != want {
		t.Fatalf("keyed record went to %d, want %d", res.Offsets[0].Partition, want)
	}
	f, err = e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "s", Partition: res.Offsets[0].Partition, Offset: res.Offsets[0].Offset})
	if err != nil || len(f.Records) != 1 || f.Records[0].GetTimestampMs() < before {
		t.Fatalf("fetch keyed: %v %v", f, err)
	}
}

func TestProduceFetchRawBatches(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "raw", 2)
	c := ctx(t)
	var want []recordbatch.Record
	var body []byte
	for b := range 3 {
		var recs []recordbatch.Record
		for i := range 5 {
			recs = append(recs, recordbatch.Record{OffsetDelta: int32(i), Timestamp: 1700000000000 + int64(b*5+i),
				Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("batch %d record %d", b, i)),
				Headers: []recordbatch.Header{{Key: "h", Value: nil}, {Key: "h", Value: []byte{0}}}})
		}
		opt := recordbatch.DefaultBuildOptions()
		if b == 1 {
			opt.Compression = recordbatch.Zstd
		}
		var err error
		if body, err = recordbatch.Append(body, recs, opt); err != nil {
			t.Fatal(err)
		}
		want = append(want, recs...)
	}
	res, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "raw",
		Batches: []*loamv1pb.RecordBatches{{Partition: 1, Batches: body}, {Partition: 1, Batches: body}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Offsets) != 2 || res.Offsets[0].Offset != 0 || res.Offsets[1].Offset != 15 || res.Offsets[1].Partition != 1 {
		t.Fatalf("produce answer %v", res.Offsets)
	}
	// Raw: the stored bytes, baseOffset patched, byte for byte what was sent otherwise.
	f, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "raw", Partition: 1, Offset: 0,
		Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if f.NextOffset != 30 || len(f.Records) != 0 {
		t.Fatalf("raw fetch: next %d, %d records", f.NextOffset, len(f.Records))
	}
	batches, err := recordbatch.Validate(f.RecordBatches)
	if err != nil {
		t.Fatalf("raw fetch answer does not validate: %v", err)
	}
	if len(batches) != 6 {
		t.Fatalf("%d batches, want 6", len(batches))
	}
	sent, _ := recordbatch.Validate(body)
	for i, b := range batches {
		if b.BaseOffset != int64(i*5) {
			t.Fatalf("batch %d base offset %d, want %d", i, b.BaseOffset, i*5)
		}
		s := sent[i%3].Raw
		if !bytes.Equal(b.Raw[8:], s[8:]) {
			t.Fatalf("batch %d: bytes after baseOffset differ from what was sent", i)
		}
	}
	// The same data as records.
	f, err = e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "raw", Partition: 1, Offset: 17, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != 13 {
		t.Fatalf("%d records from 17, want 13", len(f.Records))
	}
	for i, r := range f.Records {
		w := want[(17+i)%15]
		wr := &loamv1pb.Record{Key: w.Key, Value: w.Value, TimestampMs: &w.Timestamp}
		for _, h := range w.Headers {
			wr.Headers = append(wr.Headers, &loamv1pb.Header{Key: h.Key, Value: h.Value})
		}
		sameRecord(t, 17+i, r, wr)
	}
}

func TestFetchLongPoll(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "lp", 1)
	c := ctx(t)
	type result struct {
		f   *loamv1pb.FetchResponse
		err error
		at  time.Duration
	}
	done := make(chan result, 1)
	t0 := time.Now()
	go func() {
		f, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "lp", Offset: 0, MaxWaitMs: 10000})
		done <- result{f, err, time.Since(t0)}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the poll answered before anything was produced: %v %v", r.f, r.err)
	default:
	}
	if _, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "lp", Records: []*loamv1pb.Record{{Value: []byte("late")}}}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.f.Records) != 1 || string(r.f.Records[0].Value) != "late" || r.at > 5*time.Second {
		t.Fatalf("poll: %v %v after %v", r.f, r.err, r.at)
	}
	// An empty poll answers after its wait with the offsets.
	t0 = time.Now()
	f, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "lp", Offset: 1, MaxWaitMs: 200})
	if err != nil || len(f.Records) != 0 || f.NextOffset != 1 || f.HighWatermark != 1 || time.Since(t0) < 200*time.Millisecond {
		t.Fatalf("empty poll: %v %v after %v", f, err, time.Since(t0))
	}
}

func produceN(t *testing.T, e *env, stream string, from, n int) {
	t.Helper()
	recs := make([]*loamv1pb.Record, n)
	for i := range recs {
		recs[i] = &loamv1pb.Record{Value: []byte(fmt.Sprintf("r%d", from+i))}
	}
	if _, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: stream, Records: recs}); err != nil {
		t.Fatal(err)
	}
}

func TestSubscribe(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "sub", 1)
	produceN(t, e, "sub", 0, 3)
	sctx, cancel := context.WithCancel(ctx(t))
	sub, err := e.records.Subscribe(sctx, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "sub", Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(1)
	recv := func(sub loamv1pb.RecordService_SubscribeClient, upto int64) {
		t.Helper()
		for next < upto {
			m, err := sub.Recv()
			if err != nil {
				t.Fatalf("recv at %d: %v", next, err)
			}
			for _, r := range m.Records {
				if r.GetOffset() != next || string(r.Value) != fmt.Sprintf("r%d", next) {
					t.Fatalf("got offset %d %q, want %d", r.GetOffset(), r.Value, next)
				}
				next++
			}
			if m.NextOffset != next {
				t.Fatalf("next_offset %d after record %d", m.NextOffset, next-1)
			}
		}
	}
	recv(sub, 3)
	// Records produced while subscribed arrive as they commit.
	for i := 3; i < 9; i += 2 {
		produceN(t, e, "sub", i, 2)
		recv(sub, int64(i+2))
	}
	// Break the subscription; records produced meanwhile are read on resuming from the
	// last next_offset, none twice.
	cancel()
	if _, err := sub.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
	produceN(t, e, "sub", 9, 4)
	conn := e.dial(t) // a new connection, as a reconnecting client has
	sub, err = loamv1pb.NewRecordServiceClient(conn).Subscribe(ctx(t), &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "sub", Offset: next,
		Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORDS})
	if err != nil {
		t.Fatal(err)
	}
	recv(sub, 13)
	produceN(t, e, "sub", 13, 1)
	recv(sub, 14)

	// Raw subscription: batches whose records cover the offsets in order.
	raw, err := e.records.Subscribe(ctx(t), &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "sub", Offset: 5, Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES})
	if err != nil {
		t.Fatal(err)
	}
	for at := int64(5); at < 14; {
		m, err := raw.Recv()
		if err != nil {
			t.Fatal(err)
		}
		bs, err := recordbatch.Validate(m.RecordBatches)
		if err != nil || len(bs) == 0 || bs[0].BaseOffset > at || m.NextOffset != bs[len(bs)-1].LastOffset()+1 {
			t.Fatalf("raw message at %d: %d batches, %v", at, len(bs), err)
		}
		at = m.NextOffset
	}
}

func TestSubscribeErrors(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "se", 1)
	for _, tc := range []struct {
		req    *loamv1pb.SubscribeRequest
		code   codes.Code
		reason string
	}{
		{&loamv1pb.SubscribeRequest{Namespace: "default", Stream: "nope"}, codes.NotFound, "stream_not_found"},
		{&loamv1pb.SubscribeRequest{Namespace: "default", Stream: "se", Partition: 1}, codes.NotFound, "partition_not_found"},
		{&loamv1pb.SubscribeRequest{Namespace: "default", Stream: "se", Offset: 5}, codes.OutOfRange, "offset_out_of_range"},
		{&loamv1pb.SubscribeRequest{Namespace: "default", Stream: "se", Format: 9}, codes.InvalidArgument, "bad_request"},
	} {
		sub, err := e.records.Subscribe(ctx(t), tc.req)
		if err == nil {
			_, err = sub.Recv()
		}
		wantStatus(t, fmt.Sprint(tc.req), err, tc.code, tc.reason)
	}
}

func TestErrorCodes(t *testing.T) {
	e := start(t, httpapi.Limits{MaxRecordBytes: 1000, MaxRequestBytes: 64 << 10})
	e.createStream(t, "e", 2)
	produceN(t, e, "e", 0, 2)
	c := ctx(t)
	good, _ := recordbatch.Append(nil, []recordbatch.Record{{Value: []byte("ok")}}, recordbatch.DefaultBuildOptions())
	badCRC := slices.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	big, _ := recordbatch.Append(nil, []recordbatch.Record{{Value: make([]byte, 2000)}}, recordbatch.DefaultBuildOptions())
	withPID := slices.Clone(good)
	copy(withPID[43:51], []byte{0, 0, 0, 0, 0, 0, 0, 7}) // producerId, inside the CRC: fix it
	fixCRC(withPID)

	produce := func(req *loamv1pb.ProduceRequest) error {
		req.Namespace, req.Stream = "default", "e"
		_, err := e.records.Produce(c, req)
		return err
	}
	type tc struct {
		name   string
		err    error
		code   codes.Code
		reason string
		msg    string
	}
	cases := []tc{
		{"no stream name", func() error {
			_, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Records: []*loamv1pb.Record{{}}})
			return err
		}(), codes.InvalidArgument, "invalid_argument", "stream is required"},
		{"empty produce", produce(&loamv1pb.ProduceRequest{}), codes.InvalidArgument, "invalid_record", "no records"},
		{"records and batches", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{}}, Batches: []*loamv1pb.RecordBatches{{Batches: good}}}), codes.InvalidArgument, "invalid_record", "both"},
		{"offset set", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{Offset: ptr[int64](3)}}}), codes.InvalidArgument, "invalid_record", "records[0]: offset"},
		{"empty header key", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{}, {Headers: []*loamv1pb.Header{{Key: ""}}}}}), codes.InvalidArgument, "invalid_record", "records[1].headers[0]"},
		{"negative timestamp", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{TimestampMs: ptr[int64](-5)}}}), codes.InvalidArgument, "invalid_record", "negative"},
		{"record too large", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{Value: make([]byte, 1001)}}}), codes.InvalidArgument, "record_too_large", "more than the limit of 1000"},
		{"partition out of range", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{Partition: ptr[int32](2)}}}), codes.InvalidArgument, "partition_not_found", "partitions 0..1"},
		{"batch partition out of range", produce(&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Partition: -1, Batches: good}}}), codes.InvalidArgument, "partition_not_found", "batches[0]"},
		{"malformed batch", produce(&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Batches: good[:30]}}}), codes.InvalidArgument, "invalid_record", "truncated"},
		{"bad crc", produce(&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Batches: good}, {Batches: badCRC}}}), codes.InvalidArgument, "invalid_record", "batches[1]: recordbatch: validate: batch 0 at byte 0: batch at base offset 0: crc"},
		{"trailing garbage", produce(&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Batches: append(slices.Clone(good), 1, 2, 3)}}}), codes.InvalidArgument, "invalid_record", "batch 1 at byte"},
		{"batch too large", produce(&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Batches: big}}}), codes.InvalidArgument, "record_too_large", "more than the limit of 1000"},
		{"producer id", produce(&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Batches: withPID}}}), codes.InvalidArgument, "invalid_record", "producerId 7 with producerEpoch -1"},
		{"oversized message", produce(&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{Value: make([]byte, 200<<10)}}}), codes.ResourceExhausted, "", "larger than max"},
		{"fetch stream not found", func() error {
			_, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "nope"})
			return err
		}(), codes.NotFound, "stream_not_found", ""},
		{"fetch max_bytes", func() error {
			_, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "e", MaxBytes: -1})
			return err
		}(), codes.InvalidArgument, "bad_request", "max_bytes -1"},
		{"fetch max_wait", func() error {
			_, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "e", MaxWaitMs: 300001})
			return err
		}(), codes.InvalidArgument, "bad_request", "max_wait_ms"},
	}
	for _, k := range cases {
		st := wantStatus(t, k.name, k.err, k.code, k.reason)
		if !strings.Contains(st.Message(), k.msg) {
			t.Errorf("%s: message %q does not contain %q", k.name, st.Message(), k.msg)
		}
	}
	// Out of range carries the partition's bounds.
	_, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "e", Partition: 0, Offset: 99})
	st := wantStatus(t, "fetch past the end", err, codes.OutOfRange, "offset_out_of_range")
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && (ei.Metadata["high_watermark"] == "" || ei.Metadata["log_start"] != "0") {
			t.Fatalf("out-of-range metadata %v", ei.Metadata)
		}
	}
	// Nothing refused above was written.
	var total int64
	g, err := e.streams.GetStream(c, &loamv1pb.GetStreamRequest{Namespace: "default", Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range g.Stream.PartitionInfo {
		total += p.HighWatermark
	}
	if total != 2 {
		t.Fatalf("%d records stored, want the 2 produced before", total)
	}
}

// fixCRC recomputes the CRC32C (bytes 21..end) of a single batch after its bytes changed.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func TestAdmission(t *testing.T) {
	e := start(t, httpapi.Limits{MaxConcurrent: 1})
	e.createStream(t, "adm", 1)
	sctx, cancel := context.WithCancel(ctx(t))
	sub, err := e.records.Subscribe(sctx, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	// The open subscription holds the only slot.
	var perr error
	for range 100 {
		_, perr = e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "adm", Records: []*loamv1pb.Record{{Value: []byte("v")}}})
		if perr != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // the subscription is not admitted yet
	}
	st := wantStatus(t, "produce over the limit", perr, codes.ResourceExhausted, "overloaded")
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() <= 0 {
		t.Fatalf("no RetryInfo in %v", st.Details())
	}
	cancel()
	_, _ = sub.Recv()
	// The slot is released once the subscription ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "adm", Records: []*loamv1pb.Record{{Value: []byte("v")}}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot was not released: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConcurrentProducesAdmitted: 64 produces of 100 KiB arriving at once are admitted
// with the default limits (they hold 6.4 MiB of a 256 MiB budget); admission counts a
// produce's real message size, not the largest size a message may have.
func TestConcurrentProducesAdmitted(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "burst", 8)
	value := bytes.Repeat([]byte("x"), 1024)
	req := &loamv1pb.ProduceRequest{Namespace: "default", Stream: "burst"}
	for range 100 {
		req.Records = append(req.Records, &loamv1pb.Record{Value: value})
	}
	for round := range 3 {
		errs := make(chan error, 64)
		start := make(chan struct{})
		for range 64 {
			go func() {
				<-start
				_, err := e.records.Produce(ctx(t), req)
				errs <- err
			}()
		}
		close(start)
		for range 64 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// TestSubscribeEndsWhenStreamDeleted: deleting the stream ends its open subscriptions
// with NOT_FOUND instead of leaving them waiting on a stream that is gone.
func TestSubscribeEndsWhenStreamDeleted(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "gone", 1)
	produceN(t, e, "gone", 0, 1)
	sub, err := e.records.Subscribe(ctx(t), &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.streams.DeleteStream(ctx(t), &loamv1pb.DeleteStreamRequest{Namespace: "default", Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sub.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		wantStatus(t, "subscription of a deleted stream", err, codes.NotFound, "stream_not_found")
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription of a deleted stream is still open after 10 s")
	}
}

// TestCommitUnknown: a produce whose commit outlives the produce wait answers UNAVAILABLE
// commit_unknown with may_have_happened=true, and indeed the record is then committed.
func TestCommitUnknown(t *testing.T) {
	e := start(t, httpapi.Limits{ProduceWait: time.Millisecond}) // the node flushes every 5 ms
	e.createStream(t, "cu", 1)
	_, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "cu", Records: []*loamv1pb.Record{{Value: []byte("maybe")}}})
	st := wantStatus(t, "produce past its wait", err, codes.Unavailable, "commit_unknown")
	var md map[string]string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			md = ei.Metadata
		}
	}
	if md["may_have_happened"] != "true" || md["retriable"] != "true" {
		t.Fatalf("commit_unknown metadata %v", md)
	}
	f, err := e.records.Fetch(ctx(t), &loamv1pb.FetchRequest{Namespace: "default", Stream: "cu", MaxWaitMs: 5000})
	if err != nil || len(f.Records) != 1 || string(f.Records[0].Value) != "maybe" {
		t.Fatalf("the record whose commit was unknown: %v %v", f, err)
	}
}

package kafka_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestKafkaToNative: records produced over Kafka read back over the native HTTP API and
// gRPC with the same key, value, headers (in order, repeated keys, a null value),
// timestamp and offset.
func TestKafkaToNative(t *testing.T) {
	e := start(t)
	e.createTopic(t, "x", 1)
	p := e.client(t, kgo.DefaultProduceTopic("x"))
	ts := time.UnixMilli(1732870000123)
	in := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte(`{"a":1}`), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}, {Key: "n"}}},
		{Key: []byte("k2"), Value: []byte{0xff, 0, 1}, Timestamp: ts.Add(time.Second)},
	}
	if err := p.ProduceSync(ctx(t), in...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hc, err := streamapi.NewClient(e.http)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := hc.Fetch(ctx(t), "default", "x", 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Records) != 2 {
		t.Fatalf("HTTP fetch: %d records, want 2", len(fr.Records))
	}
	for i, r := range fr.Records {
		w := in[i]
		value := []byte(r.Value)
		if r.ValueBase64 != nil {
			value = r.ValueBase64
		}
		if r.Key == nil || *r.Key != string(w.Key) || !bytes.Equal(compactJSON(value), compactJSON(w.Value)) || *r.Timestamp != w.Timestamp.UnixMilli() || *r.Offset != w.Offset {
			t.Fatalf("HTTP record %d: %+v, want %+v", i, r, w)
		}
		if len(r.Headers) != len(w.Headers) {
			t.Fatalf("HTTP record %d: headers %+v, want %+v", i, r.Headers, w.Headers)
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) || (h.Value == nil) != (w.Headers[j].Value == nil) {
				t.Fatalf("HTTP record %d header %d: %+v, want %+v", i, j, h, w.Headers[j])
			}
		}
	}
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gr, err := loamv1pb.NewRecordServiceClient(conn).Fetch(ctx(t), &loamv1pb.FetchRequest{Namespace: "default", Stream: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(gr.Records) != 2 {
		t.Fatalf("gRPC fetch: %d records", len(gr.Records))
	}
	for i, r := range gr.Records {
		w := in[i]
		if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || r.GetTimestampMs() != w.Timestamp.UnixMilli() || r.GetOffset() != w.Offset || len(r.Headers) != len(w.Headers) {
			t.Fatalf("gRPC record %d: %+v, want %+v", i, r, w)
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) || (h.Value == nil) != (w.Headers[j].Value == nil) {
				t.Fatalf("gRPC record %d header %d: %+v, want %+v", i, j, h, w.Headers[j])
			}
		}
	}
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// TestNativeToKafka: records produced over the native HTTP API are consumed over Kafka
// with the same key, value, headers, timestamp and offset.
func TestNativeToKafka(t *testing.T) {
	e := start(t)
	e.createTopic(t, "y", 1)
	hc, err := streamapi.NewClient(e.http)
	if err != nil {
		t.Fatal(err)
	}
	key, p0, tsMs := "k", int32(0), int64(1732870000456)
	recs := []streamapi.Record{
		{Key: &key, Partition: &p0, Timestamp: &tsMs, Value: json.RawMessage(`{"b":2}`), Headers: streamapi.Headers{streamapi.StringHeader("h", "1"), {Key: "n"}}},
		{Partition: &p0, Timestamp: &tsMs, ValueBase64: []byte{1, 2, 3}},
	}
	pr, err := hc.Produce(ctx(t), "default", "y", recs)
	if err != nil {
		t.Fatal(err)
	}
	c := e.client(t, kgo.ConsumeTopics("y"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < 2 {
		fs := c.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	if string(got[0].Key) != "k" || string(compactJSON(got[0].Value)) != `{"b":2}` || got[0].Timestamp.UnixMilli() != tsMs || got[0].Offset != pr.Offsets[0].Offset ||
		len(got[0].Headers) != 2 || got[0].Headers[0].Key != "h" || string(got[0].Headers[0].Value) != "1" || got[0].Headers[1].Value != nil {
		t.Fatalf("record 0: %+v (produced at %+v)", got[0], pr.Offsets[0])
	}
	if got[1].Key != nil || !bytes.Equal(got[1].Value, []byte{1, 2, 3}) || got[1].Offset != pr.Offsets[1].Offset {
		t.Fatalf("record 1: %+v", got[1])
	}
}

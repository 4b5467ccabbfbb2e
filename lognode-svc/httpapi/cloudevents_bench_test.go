package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/cloudevents"
	"github.com/loamhq/loam/shared/objstore"
)

// BenchmarkCloudEventsIngest: events per second ingested through the dedup ledger in
// batches of 100 (POST …/events, application/cloudevents-batch+json), next to plain
// produce of the same records (the same ce_ headers, key and value, POST …/records) in
// the same run, on a real single-voter sequencer and an in-memory bucket; and the ledger's
// bytes per event in the state machine. Run:
//
//	go test -run '^$' -bench CloudEventsIngest -benchtime 200x ./lognode-svc/httpapi/
func BenchmarkCloudEventsIngest(b *testing.B) {
	seq := servertest.Start(b, func(c *server.Config) { c.NoSync = false })
	mc := server.NewLocalClient(seq)
	b.Cleanup(func() { mc.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "bench", Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet(), Zone: "z1"})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	b.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	tn := &testNode{meta: mc}
	tn.createStream(b, "ce", 4)
	tn.createStream(b, "plain", 4)
	const batch = 100
	seqNo := 0
	// One request body of each kind: 100 events of about 300 bytes (attributes, a typed
	// extension, a JSON data object), unique source + id each time.
	bodies := func() (ceBody, plainBody []byte) {
		var events []*cloudevents.Event
		for i := 0; i < batch; i++ {
			seqNo++
			js := fmt.Sprintf(`{"specversion":"1.0","id":"evt-%09d","source":"https://hooks.example.com/github","type":"com.github.push","subject":"refs/heads/main","time":"2026-11-30T12:00:00Z","attempt":1,"data":{"repo":"loamhq/loam","ref":"main","commits":3,"pusher":"someone@example.com"}}`, seqNo)
			e, err := cloudevents.DecodeJSON([]byte(js))
			if err != nil {
				b.Fatal(err)
			}
			events = append(events, e)
		}
		ceBody = cloudevents.AppendBatchJSON(nil, events)
		var pb bytes.Buffer
		pb.WriteString(`{"records":[`)
		for i, e := range events {
			if i > 0 {
				pb.WriteByte(',')
			}
			r := cloudevents.Record(e)
			pb.WriteString(`{"value":`)
			pb.Write(r.Value)
			pb.WriteString(`,"headers":[`)
			for j, h := range r.Headers {
				if j > 0 {
					pb.WriteByte(',')
				}
				fmt.Fprintf(&pb, `{"key":%q,"value":%q}`, h.Key, h.Value)
			}
			pb.WriteString(`]}`)
		}
		pb.WriteString(`]}`)
		return ceBody, pb.Bytes()
	}
	send := func(url, ct string, body []byte) {
		resp, err := http.Post(url, ct, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
	}
	b.Run("dedup", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			ce, _ := bodies()
			b.StartTimer()
			send(srv.URL+"/v1/namespaces/default/streams/ce/events", cloudevents.MediaBatchJSON, ce)
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		entries, size, err := seq.LedgerStats()
		if err != nil {
			b.Fatal(err)
		}
		if entries > 0 {
			b.ReportMetric(float64(size)/float64(entries), "ledger-B/event")
		}
	})
	b.Run("plain", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			_, plain := bodies()
			b.StartTimer()
			send(srv.URL+"/v1/namespaces/default/streams/plain/records", "application/json", plain)
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
	})
}

package streamapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestProduceIdempotentBody: the request's exact bytes (a protocol change: golden), its
// decoding by the server's request type, and the client's checks before sending.
func TestProduceIdempotentBody(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Write([]byte(`{"offsets":[{"partition":2,"offset":7},{"partition":0,"offset":3}],"token":"v1.9"}`))
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	p0, p2 := int32(0), int32(2)
	recs := []Record{{Partition: &p2, Value: json.RawMessage(`{"a":1}`)}, {Partition: &p0, Value: json.RawMessage(`2`)}}
	res, err := c.ProduceIdempotent(context.Background(), "default", "s", ProducerID{ProducerID: 42, Epoch: 3}, map[int32]int32{2: 2147483647, 0: 0}, recs)
	if err != nil || res.Offsets[0].Offset != 7 {
		t.Fatalf("%+v %v", res, err)
	}
	const want = `{"producer_id":42,"epoch":3,"sequences":{"0":0,"2":2147483647},"records":[{"partition":2,"value":{"a":1}},{"partition":0,"value":2}]}`
	if string(got) != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	var req ProduceRequest
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || *req.ProducerID != 42 || *req.Epoch != 3 || req.Sequences["2"] != math.MaxInt32 || len(req.Records) != 2 {
		t.Fatalf("%+v %v", req, err)
	}
	for name, call := range map[string]func() error{
		"no partition": func() error {
			_, err := c.ProduceIdempotent(context.Background(), "default", "s", ProducerID{ProducerID: 1}, map[int32]int32{0: 0}, []Record{{Value: json.RawMessage(`1`)}})
			return err
		},
		"no sequence": func() error {
			_, err := c.ProduceIdempotent(context.Background(), "default", "s", ProducerID{ProducerID: 1}, map[int32]int32{1: 0}, recs)
			return err
		},
		"extra sequence": func() error {
			_, err := c.ProduceIdempotent(context.Background(), "default", "s", ProducerID{ProducerID: 1}, map[int32]int32{0: 0, 2: 0, 5: 0}, recs)
			return err
		},
	} {
		if err := call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestIdempotentProducerRetries: Send repeats a request whose answer was lost with the
// same sequences, and moves them on only once answered; a refusal is returned as is.
func TestIdempotentProducerRetries(t *testing.T) {
	var calls atomic.Int64
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/namespaces/default/producers" {
			w.Write([]byte(`{"producer_id":5,"epoch":0}`))
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			w.Write([]byte(`{"error":{"code":"commit_unknown","message":"x","retriable":true}}`))
		case 4:
			w.WriteHeader(409)
			w.Write([]byte(`{"error":{"code":"producer_fenced","message":"fenced"}}`))
		default:
			w.Write([]byte(`{"offsets":[{"partition":1,"offset":0},{"partition":1,"offset":1}],"token":"v1.1"}`))
		}
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	p, err := c.NewIdempotentProducer(context.Background(), "default", "s", "")
	if err != nil {
		t.Fatal(err)
	}
	q := int32(1)
	recs := []Record{{Partition: &q, Value: json.RawMessage(`1`)}, {Partition: &q, Value: json.RawMessage(`2`)}}
	if _, err := p.Send(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(context.Background(), recs); ErrorCode(err) != CodeProducerFenced || !IsProducerRefusal(err) {
		t.Fatalf("%v", err)
	}
	var s []int32
	for _, b := range bodies {
		var pf ProducerFields
		if err := json.Unmarshal([]byte(b), &pf); err != nil {
			t.Fatal(err)
		}
		s = append(s, pf.Sequences["1"])
	}
	if len(s) != 4 || s[0] != 0 || s[1] != 0 || s[2] != 2 || s[3] != 4 {
		t.Fatalf("sequences sent %v, want [0 0 2 4]", s)
	}
	if nextSequence(math.MaxInt32-1, 3) != 1 || nextSequence(3, 2) != 5 {
		t.Fatal("nextSequence")
	}
}

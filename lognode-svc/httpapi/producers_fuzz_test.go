package httpapi

import (
	"errors"
	"testing"

	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/recordbatch"
)

// FuzzWithProducer feeds arbitrary produce bodies to the produce decoder and the
// producer-field check. Invariants: neither panics; each fails only with an input error
// (a 4xx answer); when the check
// succeeds with a producer, every request carries it with its partition's sequence and its
// batch still parses (CRC included) with the producer in its header.
func FuzzWithProducer(f *testing.F) {
	for _, s := range []string{
		`{"records":[{"partition":0,"value":1}]}`,
		`{"producer_id":7,"epoch":1,"sequences":{"0":5,"2":0},"records":[{"partition":0,"value":1},{"partition":2,"value":2}]}`,
		`{"producer_id":7,"epoch":1,"sequences":{"0":5},"records":[{"value":1}]}`,
		`{"producer_id":7,"epoch":99999,"sequences":{"0":5},"records":[{"partition":0}]}`,
		`{"producer_id":7,"epoch":1,"sequences":{"00":5},"records":[{"partition":0}]}`,
		`{"epoch":1}`,
		`{"producer_id":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var reqs []writer.Request
		for _, p := range []int32{0, 2} {
			b, err := recordbatch.Append(nil, []recordbatch.Record{{Value: []byte("v")}}, recordbatch.DefaultBuildOptions())
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, writer.Request{Partition: p, Batches: b, Records: 1})
		}
		recs, pf, err := decodeProduce(body, 4, Limits{}.WithDefaults(), 0, 1000)
		if err == nil {
			err = withProducer(pf, recs, reqs)
		}
		if err != nil {
			var in *inputError
			if !errors.As(err, &in) || in.status/100 != 4 {
				t.Fatalf("%q: %v is no input error", body, err)
			}
			return
		}
		for _, rq := range reqs {
			bt, _, perr := recordbatch.Parse(rq.Batches)
			if perr != nil {
				t.Fatalf("%q: batch no longer parses: %v", body, perr)
			}
			if rq.Producer.Has() && (bt.ProducerID != rq.Producer.ID || bt.ProducerEpoch != rq.Producer.Epoch || bt.BaseSequence != rq.Producer.BaseSequence) {
				t.Fatalf("%q: header %d/%d/%d, request %+v", body, bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence, rq.Producer)
			}
			if rq.Producer.Has() != reqs[0].Producer.Has() {
				t.Fatalf("%q: producer on some requests only", body)
			}
		}
	})
}

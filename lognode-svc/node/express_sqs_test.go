package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/notify"
)

type fakeSQS struct {
	mu   sync.Mutex
	fail bool
	sent []*sqs.SendMessageInput
}

func (f *fakeSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("sqs down")
	}
	f.sent = append(f.sent, in)
	return &sqs.SendMessageOutput{}, nil
}

// TestExpressQueue: committed keys go out as S3 ObjectCreated events the segmenter takes,
// at most MaxPerMessage per message, delayed; a failed send keeps them for the next; past
// MaxPending keys are dropped and counted.
func TestExpressQueue(t *testing.T) {
	f := &fakeSQS{}
	q := &node.ExpressQueue{Client: f, QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/seg", Bucket: "loam-express", Region: "eu-west-1",
		Delay: 3 * time.Second, MaxPerMessage: 2, MaxPending: 5, Logger: quiet()}
	ctx := context.Background()
	f.fail = true
	for i := range 3 {
		q.Committed(fmt.Sprintf("wal/express/n-1/%026d.wal", i))
	}
	if err := q.Flush(ctx); err == nil {
		t.Fatal("Flush with SQS down: no error")
	}
	f.fail = false
	for i := 3; i < 7; i++ { // 3 kept + 4 new: 2 over MaxPending 5
		q.Committed(fmt.Sprintf("wal/express/n-1/%026d.wal", i))
	}
	if d := q.Dropped(); d != 2 {
		t.Fatalf("dropped %d, want 2", d)
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.sent) != 3 {
		t.Fatalf("%d messages for 5 keys at 2 per message, want 3", len(f.sent))
	}
	var keys []string
	for _, m := range f.sent {
		if m.DelaySeconds != 3 || *m.QueueUrl != q.QueueURL {
			t.Fatalf("message delay %d queue %s", m.DelaySeconds, *m.QueueUrl)
		}
		var ev events.S3Event
		if err := json.Unmarshal([]byte(*m.MessageBody), &ev); err != nil {
			t.Fatal(err)
		}
		objs, err := notify.Objects(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if !o.Created() || o.Bucket != "loam-express" || o.Sequencer == "" {
				t.Fatalf("notification %+v", o)
			}
			keys = append(keys, o.Key)
		}
	}
	for i, k := range keys {
		if want := fmt.Sprintf("wal/express/n-1/%026d.wal", i); k != want {
			t.Fatalf("key %d = %s, want %s (unsent keys first, in order)", i, k, want)
		}
	}
	if err := (&node.ExpressQueue{Client: f, QueueURL: "u", Delay: 16 * time.Minute}).Flush(ctx); err == nil {
		t.Fatal("a delay over SQS's 15 minutes: no error")
	}
}

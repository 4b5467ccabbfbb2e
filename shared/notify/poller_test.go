package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/loamhq/loam/tests/testserver"
)

// fakeSQS is an in-test queue: received messages are invisible until deleted or until the
// test makes them visible again (redeliver).
type fakeSQS struct {
	mu       sync.Mutex
	msgs     []types.Message
	inflight map[string]types.Message // receipt handle -> message
	deleted  []string
	n        int
}

func (f *fakeSQS) send(body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("m%d", f.n)
	f.msgs = append(f.msgs, types.Message{MessageId: aws.String(id), Body: aws.String(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(int(in.MaxNumberOfMessages), len(f.msgs))
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range f.msgs[:n] {
		f.n++
		m.ReceiptHandle = aws.String(fmt.Sprintf("rh%d", f.n))
		f.inflight[*m.ReceiptHandle] = m
		out.Messages = append(out.Messages, m)
	}
	f.msgs = f.msgs[n:]
	return out, nil
}

func (f *fakeSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range in.Entries {
		m := f.inflight[*e.ReceiptHandle]
		delete(f.inflight, *e.ReceiptHandle)
		f.deleted = append(f.deleted, *m.Body)
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// redeliver makes every received, undeleted message visible again (a visibility timeout).
func (f *fakeSQS) redeliver() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.inflight {
		f.msgs = append(f.msgs, m)
	}
	clear(f.inflight)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestPollerLambdaSemantics(t *testing.T) {
	ctx := context.Background()
	q := &fakeSQS{inflight: map[string]types.Message{}}
	for _, b := range []string{"ok1", "fail", "ok2", "boom-batch", "ok3"} {
		q.send(b)
	}
	var got [][]string
	p := &Poller{Client: q, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/loam-wal", Region: "eu-west-1", BatchSize: 3, Logger: quiet(),
		Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var bodies []string
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				if m.EventSource != "aws:sqs" || m.EventSourceARN != "arn:aws:sqs:eu-west-1:123456789012:loam-wal" || m.AWSRegion != "eu-west-1" || m.ReceiptHandle == "" {
					t.Errorf("message not in Lambda's shape: %+v", m)
				}
				bodies = append(bodies, m.Body)
				if m.Body == "fail" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
			}
			got = append(got, bodies)
			if slices.Contains(bodies, "boom-batch") {
				return events.SQSEventResponse{}, errors.New("whole batch fails")
			}
			return resp, nil
		}}
	for {
		n, err := p.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	// Batch 1 (ok1 fail ok2): fail is kept. Batch 2 (boom-batch ok3): the handler erred,
	// nothing is deleted.
	if strings.Join(q.deleted, ",") != "ok1,ok2" || len(got) != 2 {
		t.Fatalf("deleted %v, batches %v", q.deleted, got)
	}
	q.redeliver()
	p.Handler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}
	for {
		n, _ := p.Poll(ctx)
		if n == 0 {
			break
		}
	}
	slices.Sort(q.deleted)
	if strings.Join(q.deleted, ",") != "boom-batch,fail,ok1,ok2,ok3" {
		t.Fatalf("after redelivery deleted %v", q.deleted)
	}
	// An unknown item identifier fails the whole batch, as Lambda does.
	q.deleted = nil
	q.send("x")
	p.Handler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ""}}}, nil
	}
	if n, err := p.Poll(ctx); n != 1 || err != nil || len(q.deleted) != 0 {
		t.Fatalf("unknown id: %d %v deleted %v", n, err, q.deleted)
	}
}

func TestPollerConfig(t *testing.T) {
	for _, p := range []*Poller{
		{}, {Client: &fakeSQS{}}, {Client: &fakeSQS{}, QueueURL: "u"},
		{Client: &fakeSQS{}, QueueURL: "u", Handler: SQS(nil), BatchSize: 11},
		{Client: &fakeSQS{}, QueueURL: "u", Handler: SQS(nil), WaitTime: time.Minute},
	} {
		if _, err := p.Poll(context.Background()); !errors.Is(err, ErrPoller) {
			t.Errorf("%+v: %v", p, err)
		}
		if err := p.Run(context.Background()); !errors.Is(err, ErrPoller) {
			t.Errorf("run %+v: %v", p, err)
		}
	}
	if QueueARN("http://127.0.0.1:5000/123456789012/q", "us-east-1") != "arn:aws:sqs:us-east-1:123456789012:q" || QueueARN("nope", "r") != "" {
		t.Fatal("QueueARN")
	}
}

// NewMotoSQS returns an SQS client of the moto server at url.
func newMotoSQS(url string) *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// TestPollerMoto runs the poller against moto's SQS: a failed message comes back after the
// visibility timeout, the others are deleted.
func TestPollerMoto(t *testing.T) {
	ctx := context.Background()
	url := testserver.StartMoto(t)
	c := newMotoSQS(url)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("loam-test")})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b", "c"} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	p := &Poller{Client: c, QueueURL: *q.QueueUrl, WaitTime: time.Second, VisibilityTimeout: time.Second, Logger: quiet(),
		Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				seen[m.Body]++
				if m.Attributes["ApproximateReceiveCount"] == "" {
					t.Errorf("no receive count: %+v", m.Attributes)
				}
				if m.Body == "b" && seen["b"] == 1 {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
			}
			return resp, nil
		}}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		ok := seen["a"] == 1 && seen["c"] == 1 && seen["b"] == 2
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seen %v", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The last handled message is deleted after its handler returns: wait for the queue to
	// drain before stopping the poller.
	for {
		attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		if attrs.Attributes["ApproximateNumberOfMessages"] == "0" && attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained: %v (seen %v)", attrs.Attributes, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if seen["a"] != 1 || seen["c"] != 1 || seen["b"] != 2 {
		t.Fatalf("deliveries %v, want a and c once, b twice", seen)
	}
}

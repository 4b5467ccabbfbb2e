package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client the poller uses; *sqs.Client satisfies it.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Poller drains an SQS queue into a handler the way Lambda's SQS event source does (see
// the package comment). Set the fields, then call Run (or Poll for one batch).
type Poller struct {
	Client   SQSAPI
	QueueURL string
	// QueueARN fills the messages' eventSourceARN; default: derived from QueueURL
	// (arn:aws:sqs:REGION:ACCOUNT:NAME).
	QueueARN string
	Region   string // the messages' awsRegion; default us-east-1
	// BatchSize is the most messages one invocation gets, 1–10; default 10.
	BatchSize int32
	// WaitTime is the long-poll wait of each receive, at most 20 s; default 20 s. Zero
	// seconds is not expressible: use time.Millisecond for short polling.
	WaitTime time.Duration
	// VisibilityTimeout overrides the queue's for received messages; 0: the queue's.
	VisibilityTimeout time.Duration
	Handler           func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	Logger            *slog.Logger
}

// ErrPoller: the poller is misconfigured.
var ErrPoller = errors.New("notify: poller")

func (p *Poller) check() error {
	switch {
	case p.Client == nil:
		return fmt.Errorf("%w: no Client", ErrPoller)
	case p.QueueURL == "":
		return fmt.Errorf("%w: no QueueURL", ErrPoller)
	case p.Handler == nil:
		return fmt.Errorf("%w: no Handler", ErrPoller)
	case p.BatchSize < 0 || p.BatchSize > 10:
		return fmt.Errorf("%w: BatchSize %d not in 1..10", ErrPoller, p.BatchSize)
	case p.WaitTime < 0 || p.WaitTime > 20*time.Second:
		return fmt.Errorf("%w: WaitTime %v not in 0..20s", ErrPoller, p.WaitTime)
	}
	return nil
}

// Run polls until ctx ends, backing off (up to 5 s) after receive errors. It returns
// ctx's error, or a configuration error at once.
func (p *Poller) Run(ctx context.Context) error {
	if err := p.check(); err != nil {
		return err
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.logger().Warn("sqs poll failed", "queue", p.QueueURL, "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
	return ctx.Err()
}

// Poll receives one batch (waiting up to WaitTime), invokes the handler with it and deletes
// the messages that succeeded. It returns how many messages were received. A handler error
// is logged, not returned: its messages are left for redelivery.
func (p *Poller) Poll(ctx context.Context) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	batch := p.BatchSize
	if batch == 0 {
		batch = 10
	}
	wait := p.WaitTime
	if wait == 0 {
		wait = 20 * time.Second
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         batch,
		WaitTimeSeconds:             int32(wait / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
	if p.VisibilityTimeout > 0 {
		in.VisibilityTimeout = int32((p.VisibilityTimeout + time.Second - 1) / time.Second)
	}
	out, err := p.Client.ReceiveMessage(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("notify: receive from %s: %w", p.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	ev := p.event(out.Messages)
	resp, err := p.Handler(ctx, ev)
	if err != nil {
		p.logger().Warn("handler failed; messages left for redelivery", "queue", p.QueueURL, "messages", len(ev.Records), "err", err)
		return len(out.Messages), nil
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	known := make(map[string]bool, len(ev.Records))
	for _, m := range ev.Records {
		known[m.MessageId] = true
	}
	for _, f := range resp.BatchItemFailures {
		if !known[f.ItemIdentifier] {
			// Lambda fails the whole batch on an unknown or empty item identifier.
			p.logger().Warn("handler reported an unknown message; whole batch left for redelivery", "queue", p.QueueURL, "id", f.ItemIdentifier)
			return len(out.Messages), nil
		}
		failed[f.ItemIdentifier] = true
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range ev.Records {
		if !failed[m.MessageId] {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.ReceiptHandle)})
		}
	}
	if len(del) == 0 {
		return len(out.Messages), nil
	}
	dout, err := p.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: del})
	if err != nil {
		return len(out.Messages), fmt.Errorf("notify: delete from %s: %w", p.QueueURL, err)
	}
	if len(dout.Failed) > 0 {
		// Those are redelivered and handled again: harmless for idempotent handlers.
		p.logger().Warn("some deletes failed; those messages will be redelivered", "queue", p.QueueURL, "failed", len(dout.Failed))
	}
	return len(out.Messages), nil
}

// event builds the events.SQSEvent Lambda would pass for msgs.
func (p *Poller) event(msgs []types.Message) events.SQSEvent {
	region := p.Region
	if region == "" {
		region = "us-east-1"
	}
	arn := p.QueueARN
	if arn == "" {
		arn = QueueARN(p.QueueURL, region)
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		sm := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             m.Attributes,
			EventSourceARN:         arn,
			EventSource:            SourceSQS,
			AWSRegion:              region,
		}
		if sm.Attributes == nil {
			sm.Attributes = map[string]string{}
		}
		if len(m.MessageAttributes) > 0 {
			sm.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
			for k, v := range m.MessageAttributes {
				sm.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue,
					StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues, DataType: aws.ToString(v.DataType)}
			}
		}
		ev.Records = append(ev.Records, sm)
	}
	return ev
}

// QueueARN derives a queue's ARN from its URL (https://HOST/ACCOUNT/NAME), as
// arn:aws:sqs:REGION:ACCOUNT:NAME. It returns "" for a URL of another shape.
func QueueARN(queueURL, region string) string {
	rest := queueURL
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || parts[1] == "" || parts[2] == "" {
		return ""
	}
	return "arn:aws:sqs:" + region + ":" + parts[1] + ":" + parts[2]
}

func (p *Poller) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

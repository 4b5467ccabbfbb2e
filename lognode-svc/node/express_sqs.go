package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/loamhq/loam/shared/notify"
)

// SQSSender is the part of the SQS client ExpressQueue uses; *sqs.Client satisfies it.
type SQSSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// ExpressQueue is the ExpressNotifier of a node in AWS: it sends the segmenter's queue the
// S3 event notifications a directory bucket does not send (docs/express.md). Every
// Interval it sends one SQS message, an S3 ObjectCreated:Put event naming every express
// WAL object committed since the last one (at most MaxPerMessage; more go in more
// messages), delayed by Delay so the objects are past the segmenter's express age when it
// reads them and one segment covers a partition's last Delay of express objects.
//
// Memory: at most MaxPending keys wait (default 16384, about 1.5 MiB); past that, keys are
// dropped and counted (Dropped): their objects are committed, so the segmenter's scheduled
// sweep still segments them, later. A failed send is retried at the next tick with the
// keys kept, within the same bound.
type ExpressQueue struct {
	Client        SQSSender
	QueueURL      string
	Bucket        string        // the event's bucket name (the express bucket's, for the claim key)
	Region        string        // the event's awsRegion
	Interval      time.Duration // default 1 s
	Delay         time.Duration // SQS DelaySeconds, whole seconds up to 15 min; default 2 s
	MaxPending    int           // default 16384
	MaxPerMessage int           // default 200 (an event of 200 records is about 150 KB; SQS takes 256 KiB)
	Logger        *slog.Logger

	mu      sync.Mutex
	pending []notify.Object
	dropped int64
	seq     uint64
}

func (q *ExpressQueue) defaults() error {
	switch {
	case q.Client == nil || q.QueueURL == "":
		return errors.New("node: express queue: needs a client and a queue URL")
	case q.Delay < 0 || q.Delay > 15*time.Minute:
		return fmt.Errorf("node: express queue: delay %v not in 0..15m (SQS DelaySeconds)", q.Delay)
	}
	if q.Interval <= 0 {
		q.Interval = time.Second
	}
	if q.Delay == 0 {
		q.Delay = 2 * time.Second
	}
	if q.MaxPending <= 0 {
		q.MaxPending = 16384
	}
	if q.MaxPerMessage <= 0 {
		q.MaxPerMessage = 200
	}
	if q.Logger == nil {
		q.Logger = slog.Default()
	}
	return nil
}

// Committed implements ExpressNotifier: it queues key, or drops it when MaxPending wait.
func (q *ExpressQueue) Committed(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) >= q.maxPending() {
		q.dropped++
		return
	}
	q.seq++
	now := time.Now()
	q.pending = append(q.pending, notify.Object{Bucket: q.Bucket, Key: key, EventTime: now,
		Sequencer: strconv.FormatInt(now.UnixNano(), 16) + strconv.FormatUint(q.seq, 16)})
}

func (q *ExpressQueue) maxPending() int {
	if q.MaxPending <= 0 {
		return 16384
	}
	return q.MaxPending
}

// Dropped is how many keys were dropped because MaxPending were waiting.
func (q *ExpressQueue) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// Run sends every Interval until ctx ends, then sends what is left once (within 5 s).
func (q *ExpressQueue) Run(ctx context.Context) error {
	if err := q.defaults(); err != nil {
		return err
	}
	t := time.NewTicker(q.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return q.Flush(fctx)
		case <-t.C:
			if err := q.Flush(ctx); err != nil && ctx.Err() == nil {
				q.Logger.Warn("express offload: notifying the segmenter's queue failed; retrying", "queue", q.QueueURL, "err", err)
			}
		}
	}
}

// Flush sends the waiting keys now; on failure they stay queued.
func (q *ExpressQueue) Flush(ctx context.Context) error {
	if err := q.defaults(); err != nil {
		return err
	}
	q.mu.Lock()
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), q.MaxPerMessage)
		body, err := json.Marshal(notify.NewS3Event(q.Region, batch[:n]...))
		if err == nil {
			_, err = q.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.QueueURL), MessageBody: aws.String(string(body)),
				DelaySeconds: int32(q.Delay / time.Second)})
		}
		if err != nil {
			q.requeue(batch)
			return fmt.Errorf("node: express queue: send %d notifications: %w", n, err)
		}
		batch = batch[n:]
	}
	return nil
}

// requeue puts unsent keys back in front of those queued since, within MaxPending.
func (q *ExpressQueue) requeue(batch []notify.Object) {
	q.mu.Lock()
	defer q.mu.Unlock()
	all := append(batch, q.pending...)
	if over := len(all) - q.maxPending(); over > 0 {
		q.dropped += int64(over)
		all = all[:q.maxPending()]
	}
	q.pending = all
}

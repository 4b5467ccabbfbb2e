package functions_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/testserver"
)

// TestMotoNotifications: a log node writes WAL objects to an S3 bucket on moto_server whose
// notification configuration sends s3:ObjectCreated:* under wal/ to an SQS queue; a Poller
// drains the queue into the segmenter the way Lambda's SQS event source does, with the
// coordination store on moto's DynamoDB. Segments appear, and a log node with cold caches
// fetches exactly the records that were produced.
func TestMotoNotifications(t *testing.T) {
	ctx := context.Background()
	url := testserver.StartMoto(t)
	bucket, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: "loam-data", Endpoint: url, Region: "us-east-1",
		AccessKey: "test", SecretKey: "test", PathStyle: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	q := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	qout, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("loam-wal-created")})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: qout.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	queueARN := attrs.Attributes["QueueArn"]
	_, err = bucket.Client().PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String("loam-data"),
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			QueueArn: aws.String(queueARN),
			Events:   []s3types.Event{"s3:ObjectCreated:*"},
			Filter: &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
				{Name: s3types.FilterRuleNamePrefix, Value: aws.String("wal/")},
			}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := coord.NewDynamo(ctx, coord.DynamoConfig{Table: "loam-coord", Endpoint: url, Region: "us-east-1", AccessKey: "test", SecretKey: "test", CreateTable: true})
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, bucket, 5*time.Millisecond)
	st := c.createStream(streamapi.CreateStreamRequest{Name: "m", Partitions: ptr(int32(2))})
	seg, err := segmenter.New(segmenter.Config{Bucket: bucket, Meta: c.meta, Coord: store, TargetBytes: 16 << 10, MaxAge: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var delivered []string
	// segMu is held across each segmenter run; once stopped is set under it, no run is in
	// flight and none starts, so the orphan check below never sees a segment that was put
	// but not yet committed.
	var segMu sync.Mutex
	stopped := false
	handle := notify.SQS(func(ctx context.Context, ev events.S3Event) error {
		objs, err := notify.Objects(ev)
		if err != nil {
			return err
		}
		mu.Lock()
		for _, o := range objs {
			if !o.Created() || o.Bucket != "loam-data" {
				t.Errorf("unexpected notification %+v", o)
			}
			delivered = append(delivered, o.Key)
		}
		mu.Unlock()
		segMu.Lock()
		defer segMu.Unlock()
		if stopped {
			return errors.New("segmenting stopped for the orphan check")
		}
		return seg.HandleS3(ctx, ev)
	})
	p := &notify.Poller{Client: q, QueueURL: *qout.QueueUrl, WaitTime: time.Second, Handler: handle, Logger: quiet()}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() { cancel(); <-done }()

	for round := range 24 {
		c.produce("m", int32(round%2), "m", 2, 10, 200)
	}
	var before [2][]streamapi.Record
	for part := range int32(2) {
		before[part] = fetchAll(t, c.api, "m", part, 0)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		segs := 0
		for part := range int32(2) {
			es, _ := c.entries(st, part)
			_, s := kinds(es)
			if s > 0 {
				segs++
			}
		}
		if segs == 2 {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("no segments in both partitions after %d notifications", len(delivered))
		}
		time.Sleep(100 * time.Millisecond)
	}
	walObjects := len(listKeys(t, bucket, "wal/"))
	mu.Lock()
	n := len(delivered)
	for _, k := range delivered {
		if !strings.HasPrefix(k, "wal/") || !strings.HasSuffix(k, ".wal") {
			t.Errorf("notification for %q", k)
		}
	}
	mu.Unlock()
	if n == 0 || n > walObjects {
		t.Fatalf("%d notifications for %d WAL objects", n, walObjects)
	}
	_, cold := c.startNode("n2", time.Millisecond)
	for part := range int32(2) {
		sameRecords(t, "after segmenting on moto", fetchAll(t, cold, "m", part, 0), before[part])
	}
	segMu.Lock()
	stopped = true
	segMu.Unlock()
	c.checkNoOrphanSegments()
	t.Logf("%d WAL objects, %d notifications handled, %d segments", walObjects, n, len(listKeys(t, bucket, "seg/")))
}

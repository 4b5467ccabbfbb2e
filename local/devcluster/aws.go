package devcluster

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
)

// AWS runs the embedded cluster on an AWS API endpoint (moto_server, LocalStack, or AWS
// itself with Endpoint empty) in the topology a deployment has: the data in an S3 bucket,
// the coordination store in a DynamoDB table, and WAL-object-created notifications from the
// bucket to an SQS queue, which a poller drains into the segmenter the way Lambda's SQS
// event source does (batches of up to 10, partial batch failures left for redelivery).
// Missing bucket, table and queue are created. Credentials come from the environment
// (AWS_ACCESS_KEY_ID, ...), else test/test when Endpoint is set.
type AWS struct {
	Endpoint string // base URL of the emulator; empty: AWS
	Region   string // default us-east-1
	Bucket   string // default loam-dev
	Table    string // coordination table; default loam-dev-coord
	Queue    string // notification queue; default loam-dev-wal-events
}

func (a *AWS) defaults() {
	if a.Region == "" {
		a.Region = "us-east-1"
	}
	if a.Bucket == "" {
		a.Bucket = "loam-dev"
	}
	if a.Table == "" {
		a.Table = "loam-dev-coord"
	}
	if a.Queue == "" {
		a.Queue = "loam-dev-wal-events"
	}
}

// keys are static credentials for an emulator when the environment names none.
func (a *AWS) keys() (id, secret string) {
	if a.Endpoint == "" || os.Getenv("AWS_ACCESS_KEY_ID") != "" {
		return "", ""
	}
	return "test", "test"
}

// awsState is what the AWS mode set up: the queue the functions poll.
type awsState struct {
	sqs      *sqs.Client
	queueURL string
	queueARN string
	handled  atomic.Int64 // notifications handed to the segmenter
}

func (a *AWS) openBucket(ctx context.Context) (*objstore.S3, error) {
	id, secret := a.keys()
	b, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: a.Bucket, Endpoint: a.Endpoint, Region: a.Region,
		AccessKey: id, SecretKey: secret, PathStyle: a.Endpoint != "", CreateBucket: true})
	if err != nil {
		return nil, fmt.Errorf("devcluster: aws bucket %s: %w", a.Bucket, err)
	}
	return b, nil
}

func (a *AWS) openCoord(ctx context.Context) (coord.Store, error) {
	id, secret := a.keys()
	s, err := coord.NewDynamo(ctx, coord.DynamoConfig{Table: a.Table, Endpoint: a.Endpoint, Region: a.Region,
		AccessKey: id, SecretKey: secret, CreateTable: true})
	if err != nil {
		return nil, fmt.Errorf("devcluster: aws table %s: %w", a.Table, err)
	}
	return s, nil
}

// setupQueue creates the queue and points the bucket's wal/ object-created notifications
// at it (replacing the bucket's notification configuration, as Terraform's does).
func (a *AWS) setupQueue(ctx context.Context, b *objstore.S3) (*awsState, error) {
	id, secret := a.keys()
	lo := []func(*config.LoadOptions) error{config.WithRegion(a.Region)}
	if id != "" {
		lo = append(lo, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("devcluster: aws config: %w", err)
	}
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if a.Endpoint != "" {
			o.BaseEndpoint = aws.String(a.Endpoint)
		}
	})
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(a.Queue),
		Attributes: map[string]string{"VisibilityTimeout": "60", "ReceiveMessageWaitTimeSeconds": "1"}})
	if err != nil {
		return nil, fmt.Errorf("devcluster: aws queue %s: %w", a.Queue, err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return nil, fmt.Errorf("devcluster: aws queue %s: %w", a.Queue, err)
	}
	st := &awsState{sqs: client, queueURL: *q.QueueUrl, queueARN: attrs.Attributes["QueueArn"]}
	_, err = b.Client().PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(a.Bucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			Id:       aws.String("wal-object-created"),
			QueueArn: aws.String(st.queueARN),
			Events:   []s3types.Event{"s3:ObjectCreated:*"},
			Filter: &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
				{Name: s3types.FilterRuleNamePrefix, Value: aws.String("wal/")},
				{Name: s3types.FilterRuleNameSuffix, Value: aws.String(".wal")},
			}}},
		}}},
	})
	if err != nil {
		return nil, fmt.Errorf("devcluster: aws bucket %s notifications to %s: %w", a.Bucket, a.Queue, err)
	}
	return st, nil
}

// poller drains the queue into h (the segmenter's S3 handler).
func (st *awsState) poller(f *functions, h func(context.Context, events.S3Event) error, region string) *notify.Poller {
	count := func(ctx context.Context, ev events.S3Event) error {
		if err := h(ctx, ev); err != nil {
			return err
		}
		st.handled.Add(int64(len(ev.Records)))
		return nil
	}
	return &notify.Poller{Client: st.sqs, QueueURL: st.queueURL, QueueARN: st.queueARN, Region: region,
		WaitTime: time.Second, Handler: notify.SQS(count), Logger: f.log.With("fn", "segmenter")}
}

func awsName(endpoint string) string {
	if endpoint == "" {
		return "AWS"
	}
	return endpoint
}

// Notifications is how many WAL-object-created notifications the AWS mode's poller handed
// to the segmenter (0 in the other modes).
func (c *Cluster) Notifications() int64 {
	if c.aws == nil {
		return 0
	}
	return c.aws.handled.Load()
}

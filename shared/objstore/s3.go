package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config configures an S3 bucket. Zero fields fall back to the AWS SDK's defaults
// (environment, shared config files, instance roles).
type S3Config struct {
	Bucket string // required
	// Prefix is prepended to every key; a '/' is added when it does not end in one.
	Prefix string
	Region string // default: the SDK's (AWS_REGION, ...), else us-east-1
	// Endpoint is the base URL of a non-AWS server (http://127.0.0.1:7070); default:
	// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS.
	Endpoint string
	// AccessKey and SecretKey are static credentials; empty: the SDK's default chain
	// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles, roles).
	AccessKey string
	SecretKey string
	// PathStyle addresses the bucket as http://host/bucket rather than http://bucket.host,
	// as most third-party servers need.
	PathStyle bool
	// CreateBucket creates the bucket in NewS3 when it does not exist.
	CreateBucket bool
	// NoChecksums turns request checksums and response checksum validation off, except
	// where S3 requires them, for S3 APIs that reject the SDK's checksum headers or its
	// aws-chunked bodies (URL parameter checksums=false; for every bucket of a process,
	// AWS_REQUEST_CHECKSUM_CALCULATION=when_required and
	// AWS_RESPONSE_CHECKSUM_VALIDATION=when_required). By default every PUT carries a
	// CRC32 of its body (the x-amz-checksum-crc32 header, or an aws-chunked trailer over
	// TLS) that the server checks before it stores the object, and GETs of whole objects
	// are checked against the checksum the server returns. AWS, versitygw v1.8.0 and
	// moto 5.2.1 accept them (moto ignores them).
	NoChecksums bool
	// RetryMaxAttempts bounds the attempts of one request (default S3MaxAttempts); 1: no
	// retries. AttemptTimeout bounds the wait for a response's headers after the request
	// was sent (default S3AttemptTimeout), so a hung attempt is retried instead of
	// using up the caller's deadline. See the retry policy at S3MaxAttempts.
	RetryMaxAttempts int
	AttemptTimeout   time.Duration
}

// The S3 client's retry policy, tuned against S3's 503 SlowDown and 500 InternalError, a
// connection reset and a hung request (shared/objstore's fault profiles, docs/faults.md):
//
//   - attempts: up to S3MaxAttempts per request (the first and four retries), for the
//     errors the SDK deems retryable: 5xx, throttling codes (SlowDown), connection
//     errors, and attempts whose response headers did not come within S3AttemptTimeout;
//   - backoff: full jitter, a uniform draw from [0, d) with d doubling from 25 ms for
//     errors and from 200 ms for throttling (S3 asks to slow down), capped at
//     S3MaxBackoff; so four retries of errors wait 375 ms on average and never more than
//     2.35 s, four of throttling at most 5.2 s;
//   - budget: one token bucket per bucket (S3RetryBudget tokens): a retry costs 14 tokens
//     (5 when throttled), a retry that succeeds refunds them and a first-attempt success
//     adds one. When S3 fails most requests the budget empties and requests fail at their
//     first error rather than multiplying the load by five; the callers (the WAL writer
//     has its own retry loop within its 60 s budget) decide what to do with the error.
//
// Conditional puts (IfAbsent) run their own retries with the SDK's off: see putIfAbsent.
const (
	S3MaxAttempts    = 5
	S3MaxBackoff     = 2 * time.Second
	S3AttemptTimeout = 10 * time.Second
	S3RetryBudget    = 500
)

var (
	s3ErrorBaseDelay    = 25 * time.Millisecond
	s3ThrottleBaseDelay = 200 * time.Millisecond
)

// s3Backoff is the full-jitter backoff of the retry policy.
func s3Backoff(attempt int, err error) (time.Duration, error) {
	base := s3ErrorBaseDelay
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		base = s3ThrottleBaseDelay
	}
	d := min(base<<min(max(attempt-1, 0), 20), S3MaxBackoff)
	return rand.N(d) + 1, nil
}

// s3Retryer returns the retry policy of one bucket (its budget is its own).
func s3Retryer(maxAttempts int) func() aws.Retryer {
	limiter := ratelimit.NewTokenRateLimit(S3RetryBudget)
	return func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = maxAttempts
			o.MaxBackoff = S3MaxBackoff
			o.Backoff = retry.BackoffDelayerFunc(s3Backoff)
			o.RateLimiter = limiter
		})
	}
}

// S3 is a Bucket on an S3 API (AWS, versitygw, moto, LocalStack, ...).
type S3 struct {
	client *s3.Client
	bucket string
	prefix string
}

var _ Bucket = (*S3)(nil)

// Conditional-put retry policy: AWS answers 409 ConditionalRequestConflict while another
// conditional write of the key is in flight; the retry then sees 412 or succeeds.
const condMaxAttempts = 10

var (
	condBaseDelay = 10 * time.Millisecond
	condMaxDelay  = 200 * time.Millisecond
)

// NewS3 returns a bucket on the S3 API described by cfg. It sends no request unless
// cfg.CreateBucket is set.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: new s3: empty bucket name")
	}
	// Checksums on is the SDK's default ("when supported"), which its standard settings
	// turn off too (AWS_REQUEST_CHECKSUM_CALCULATION=when_required and
	// AWS_RESPONSE_CHECKSUM_VALIDATION=when_required, or request_checksum_calculation and
	// response_checksum_validation in the shared config file).
	var opts []func(*config.LoadOptions) error
	if cfg.NoChecksums {
		// Some third-party servers reject or mangle flexible checksums (aws-chunked
		// trailers): compute and validate them only where S3 requires.
		opts = append(opts,
			config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
			config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: new s3 %s: %w", cfg.Bucket, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	attempts := cfg.RetryMaxAttempts
	if attempts <= 0 {
		attempts = S3MaxAttempts
	}
	attemptTimeout := cfg.AttemptTimeout
	if attemptTimeout <= 0 {
		attemptTimeout = S3AttemptTimeout
	}
	awsCfg.Retryer = s3Retryer(attempts)
	awsCfg.RetryMaxAttempts = attempts
	awsCfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.ResponseHeaderTimeout = attemptTimeout
	})
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Responses without a checksum (ranges, listings, servers that keep none) are
		// ordinary: no log line each.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	prefix := strings.TrimLeft(cfg.Prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	b := &S3{client: client, bucket: cfg.Bucket, prefix: prefix}
	if cfg.CreateBucket {
		if err := b.createBucket(ctx, awsCfg.Region); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *S3) createBucket(ctx context.Context, region string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(b.bucket)}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{
			LocationConstraint: s3types.BucketLocationConstraint(region),
		}
	}
	_, err := b.client.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("objstore: create bucket %s: %w", b.bucket, err)
	}
	return nil
}

// Client returns the underlying SDK client.
func (b *S3) Client() *s3.Client { return b.client }

// Put writes body under key (see Bucket). IfAbsent sends If-None-Match: * and retries
// 409 ConditionalRequestConflict itself.
func (b *S3) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	if err := checkKey("put", key); err != nil {
		return err
	}
	o := ApplyPut(opts)
	if o.IfAbsent {
		return b.putIfAbsent(ctx, key, body, o)
	}
	_, err := b.client.PutObject(ctx, applySSE(b.putInput(key, body), o))
	if err != nil {
		return s3Error("put", key, err)
	}
	return nil
}

func (b *S3) putInput(key string, body []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(b.prefix + key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	}
}

// putIfAbsent runs the retries of a conditional put itself, with the SDK's retries off, so
// that it knows whether an earlier attempt may have created the object: a 412 after such
// an attempt may be its own write, and is success when the stored body is body.
func (b *S3) putIfAbsent(ctx context.Context, key string, body []byte, o PutOptions) error {
	retryable := retry.IsErrorRetryables(retry.DefaultRetryables)
	mayHaveWritten := false
	var err error
	for attempt := 0; attempt < condMaxAttempts; attempt++ {
		if attempt > 0 {
			if werr := sleepCtx(ctx, backoff(attempt)); werr != nil {
				return fmt.Errorf("objstore: put %s: %w", key, werr)
			}
		}
		in := applySSE(b.putInput(key, body), o)
		in.IfNoneMatch = aws.String("*")
		_, err = b.client.PutObject(ctx, in, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
		if err == nil {
			return nil
		}
		code, status := apiErrorCode(err)
		switch {
		case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
			if mayHaveWritten {
				if got, gerr := b.Get(ctx, key); gerr == nil && bytes.Equal(got, body) {
					return nil
				}
			}
			return fmt.Errorf("objstore: put %s: %w", key, ErrPreconditionFailed)
		case status == http.StatusConflict || code == "ConditionalRequestConflict":
			continue // a concurrent conditional write is in flight: ask again
		case ctx.Err() == nil && retryable.IsErrorRetryable(err) == aws.TrueTernary && attempt < 2:
			mayHaveWritten = true
			continue
		default:
			return s3Error("put", key, err)
		}
	}
	// Still conflicting: if the object exists now, someone else won.
	if _, serr := b.Stat(ctx, key); serr == nil {
		return fmt.Errorf("objstore: put %s: %w", key, ErrPreconditionFailed)
	}
	return s3Error("put", key, err)
}

func backoff(attempt int) time.Duration {
	d := condBaseDelay << min(attempt, 10)
	d = min(d, condMaxDelay)
	return d/2 + rand.N(d/2+1)
}

// Get returns the body stored under key.
func (b *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.prefix + key),
	})
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	body, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("objstore: get %s: %w", key, err)
	}
	return body, nil
}

// GetRange returns n bytes from off of the body under key (see Bucket) with one ranged
// GET; off == size costs a HEAD after the server's 416, n == 0 a HEAD only.
func (b *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := checkKey("get range", key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("objstore: get range %s: offset %d: %w", key, off, ErrInvalidRange)
	}
	if n == 0 {
		return b.emptyRange(ctx, key, off, n)
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if n > 0 && n <= math.MaxInt64-off {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.prefix + key),
		Range:  aws.String(rng),
	})
	if err != nil {
		if code, status := apiErrorCode(err); status == http.StatusRequestedRangeNotSatisfiable || code == "InvalidRange" {
			// off >= size, or an empty object: off == size is an empty read.
			return b.emptyRange(ctx, key, off, n)
		}
		return nil, s3Error("get range", key, err)
	}
	body, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, err)
	}
	if out.ContentRange == nil || *out.ContentRange == "" {
		// The server ignored Range and sent the whole object.
		lo, hi, err := rangeBounds(key, int64(len(body)), off, n)
		if err != nil {
			return nil, err
		}
		return body[lo:hi:hi], nil
	}
	if n > 0 && int64(len(body)) > n {
		return nil, fmt.Errorf("objstore: get range %s: asked %s, got %d bytes (%s)", key, rng, len(body), *out.ContentRange)
	}
	return body, nil
}

// emptyRange answers a GetRange that reads no bytes: the object must exist and off must
// not pass its end.
func (b *S3) emptyRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	info, err := b.stat(ctx, "get range", key)
	if err != nil {
		return nil, err
	}
	lo, hi, err := rangeBounds(key, info.Size, off, n)
	if err != nil {
		return nil, err
	}
	if lo != hi {
		// The object grew between the GET and the HEAD: it was replaced; read again.
		return b.GetRange(ctx, key, off, n)
	}
	return []byte{}, nil
}

// Stat describes the object under key (HEAD).
func (b *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey("stat", key); err != nil {
		return ObjectInfo{}, err
	}
	return b.stat(ctx, "stat", key)
}

func (b *S3) stat(ctx context.Context, op, key string) (ObjectInfo, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.prefix + key),
	})
	if err != nil {
		return ObjectInfo{}, s3Error(op, key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)}, nil
}

// List calls fn for each object under prefix in key order, paging through ListObjectsV2.
// An error from fn stops the listing and is returned as is.
func (b *S3) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.bucket),
		Prefix: aws.String(b.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("objstore: list %s: %w", prefix, err)
		}
		for _, obj := range page.Contents {
			info := ObjectInfo{
				Key:          strings.TrimPrefix(aws.ToString(obj.Key), b.prefix),
				Size:         aws.ToInt64(obj.Size),
				LastModified: aws.ToTime(obj.LastModified),
			}
			if err := fn(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the object under key; a missing key is not an error.
func (b *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.prefix + key),
	})
	if err != nil {
		err = s3Error("delete", key, err)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// Close does nothing; the SDK client needs no closing.
func (b *S3) Close() error { return nil }

// apiErrorCode returns the S3 error code and HTTP status of an SDK error (zero if absent).
func apiErrorCode(err error) (code string, status int) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var httpErr interface{ HTTPStatusCode() int }
	if errors.As(err, &httpErr) {
		status = httpErr.HTTPStatusCode()
	}
	return code, status
}

// s3Error maps an SDK error on key to the package's sentinel errors.
func s3Error(op, key string, err error) error {
	code, status := apiErrorCode(err)
	switch {
	case code == "NoSuchBucket":
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return fmt.Errorf("objstore: %s %s: %w", op, key, ErrNotFound)
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		return fmt.Errorf("objstore: %s %s: %w", op, key, ErrPreconditionFailed)
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("objstore: %s %s: %w: %w", op, key, ErrInvalidRange, err)
	}
	return fmt.Errorf("objstore: %s %s: %w", op, key, err)
}

// readBody reads and closes an object body, sized by the response's Content-Length.
func readBody(r io.ReadCloser, size *int64) ([]byte, error) {
	defer r.Close()
	if size == nil || *size < 0 || *size > 1<<40 {
		return io.ReadAll(r)
	}
	buf := make([]byte, *size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	// Read on to the end: the SDK checks the response checksum when the body ends.
	switch n, err := io.ReadFull(r, make([]byte, 1)); {
	case n > 0:
		return nil, fmt.Errorf("body longer than its Content-Length %d", *size)
	case err != io.EOF:
		return nil, err
	}
	return buf, nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Sentinel errors, wrapped with what was being parsed.
var (
	// ErrBadEvent: a payload or message body is not an event this package knows.
	ErrBadEvent = errors.New("notify: bad event")
)

// Event sources and names as AWS writes them.
const (
	SourceS3       = "aws:s3"
	SourceSQS      = "aws:sqs"
	EventPut       = "ObjectCreated:Put"
	createdPrefix  = "ObjectCreated:"
	s3TestEvent    = "s3:TestEvent"
	schemaVersion  = "1.0"
	s3EventVersion = "2.1"
)

// Object is one object notification with its key URL-decoded.
type Object struct {
	Bucket    string
	Key       string // decoded
	Size      int64
	ETag      string
	Sequencer string
	EventName string // e.g. ObjectCreated:Put
	EventTime time.Time
}

// Created reports whether the notification is an ObjectCreated:* event.
func (o Object) Created() bool { return strings.HasPrefix(o.EventName, createdPrefix) }

// ID names this notification of this object version: the claim key handlers record in the
// coordination store. It is bucket/key, then "@" and the sequencer (or the ETag when the
// event has none).
func (o Object) ID() string {
	v := o.Sequencer
	if v == "" {
		v = o.ETag
	}
	return o.Bucket + "/" + o.Key + "@" + v
}

// EncodeKey encodes an object key as S3 writes it into event notifications: form URL
// encoding (a space becomes "+", reserved bytes "%XX") with "/" left as it is.
func EncodeKey(key string) string {
	return strings.ReplaceAll(url.QueryEscape(key), "%2F", "/")
}

// DecodeKey decodes a key from an event notification (the inverse of EncodeKey; any
// percent-encoding is accepted).
func DecodeKey(key string) (string, error) {
	k, err := url.QueryUnescape(key)
	if err != nil {
		return "", fmt.Errorf("notify: decode key %q: %w: %v", key, ErrBadEvent, err)
	}
	return k, nil
}

// ParseS3Event decodes an S3 event notification document. S3's s3:TestEvent (sent when a
// notification configuration is set) decodes to an event with no records.
func ParseS3Event(b []byte) (events.S3Event, error) {
	var probe struct {
		Records *json.RawMessage `json:"Records"`
		Event   string           `json:"Event"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return events.S3Event{}, fmt.Errorf("notify: s3 event: %w: %v", ErrBadEvent, err)
	}
	if probe.Records == nil {
		if probe.Event == s3TestEvent {
			return events.S3Event{}, nil
		}
		return events.S3Event{}, fmt.Errorf("notify: s3 event: no Records: %w", ErrBadEvent)
	}
	var ev events.S3Event
	if err := json.Unmarshal(b, &ev); err != nil {
		// S3 writes eventTime in RFC 3339 with a Z; some emulators (moto) leave the zone
		// out. Read those as UTC rather than refuse the whole event.
		fixed, ok := fixEventTimes(b)
		if !ok || json.Unmarshal(fixed, &ev) != nil {
			return events.S3Event{}, fmt.Errorf("notify: s3 event: %w: %v", ErrBadEvent, err)
		}
	}
	for i, r := range ev.Records {
		if r.EventSource != SourceS3 {
			return events.S3Event{}, fmt.Errorf("notify: s3 event record %d: source %q: %w", i, r.EventSource, ErrBadEvent)
		}
	}
	return ev, nil
}

// fixEventTimes appends "Z" to eventTime values without a time zone.
func fixEventTimes(b []byte) ([]byte, bool) {
	var doc struct {
		Records []map[string]json.RawMessage `json:"Records"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, false
	}
	changed := false
	for _, r := range doc.Records {
		var t string
		if raw, ok := r["eventTime"]; !ok || json.Unmarshal(raw, &t) != nil {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, t); err == nil {
			continue
		}
		if _, err := time.Parse("2006-01-02T15:04:05.999999999", t); err != nil {
			return nil, false
		}
		r["eventTime"], _ = json.Marshal(t + "Z")
		changed = true
	}
	if !changed {
		return nil, false
	}
	out, err := json.Marshal(doc)
	return out, err == nil
}

// Objects returns the objects an S3 event names, keys decoded, in record order.
func Objects(ev events.S3Event) ([]Object, error) {
	objs := make([]Object, 0, len(ev.Records))
	for i, r := range ev.Records {
		if r.EventSource != "" && r.EventSource != SourceS3 {
			return nil, fmt.Errorf("notify: s3 event record %d: source %q: %w", i, r.EventSource, ErrBadEvent)
		}
		key, err := DecodeKey(r.S3.Object.Key)
		if err != nil {
			return nil, err
		}
		if key == "" || r.S3.Bucket.Name == "" {
			return nil, fmt.Errorf("notify: s3 event record %d: no bucket or key: %w", i, ErrBadEvent)
		}
		objs = append(objs, Object{Bucket: r.S3.Bucket.Name, Key: key, Size: r.S3.Object.Size, ETag: r.S3.Object.ETag,
			Sequencer: r.S3.Object.Sequencer, EventName: r.EventName, EventTime: r.EventTime})
	}
	return objs, nil
}

// NewS3Event builds the event S3 sends for objs (one record each), keys encoded as S3
// encodes them. EventName defaults to ObjectCreated:Put and EventTime to now.
func NewS3Event(region string, objs ...Object) events.S3Event {
	ev := events.S3Event{Records: make([]events.S3EventRecord, 0, len(objs))}
	for _, o := range objs {
		name := o.EventName
		if name == "" {
			name = EventPut
		}
		at := o.EventTime
		if at.IsZero() {
			at = time.Now()
		}
		ev.Records = append(ev.Records, events.S3EventRecord{
			EventVersion: s3EventVersion,
			EventSource:  SourceS3,
			AWSRegion:    region,
			EventTime:    at.UTC(),
			EventName:    name,
			PrincipalID:  events.S3UserIdentity{PrincipalID: "loam"},
			S3: events.S3Entity{
				SchemaVersion:   schemaVersion,
				ConfigurationID: "loam",
				Bucket:          events.S3Bucket{Name: o.Bucket, OwnerIdentity: events.S3UserIdentity{PrincipalID: "loam"}, Arn: "arn:aws:s3:::" + o.Bucket},
				Object:          events.S3Object{Key: EncodeKey(o.Key), Size: o.Size, ETag: o.ETag, Sequencer: o.Sequencer},
			},
		})
	}
	return ev
}

// S3EventFromBody decodes one SQS message body: an S3 event document, S3's test event (no
// records), or an SNS notification envelope whose Message is either.
func S3EventFromBody(body string) (events.S3Event, error) {
	var env struct {
		Type    string  `json:"Type"`
		Message *string `json:"Message"`
	}
	if err := json.Unmarshal([]byte(body), &env); err == nil && env.Type == "Notification" && env.Message != nil {
		body = *env.Message
	}
	return ParseS3Event([]byte(body))
}

// SQS wraps a handler of S3 events into a handler of SQS events whose messages carry S3
// event documents. Each message is handled alone, in order; a message whose body does not
// decode or whose handler fails is reported in BatchItemFailures (the function must be
// configured with ReportBatchItemFailures, as template.yaml does), the others succeed. It
// never returns an error itself.
func SQS(fn func(context.Context, events.S3Event) error) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, m := range ev.Records {
			s3ev, err := S3EventFromBody(m.Body)
			if err == nil && len(s3ev.Records) > 0 {
				err = fn(ctx, s3ev)
			}
			if err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
		}
		return resp, nil
	}
}

// Handler routes a function's invocation payloads.
type Handler struct {
	// S3 handles S3 event notifications, delivered directly or through SQS. Nil: such
	// payloads fail with ErrBadEvent.
	S3 func(context.Context, events.S3Event) error
	// Sweep runs on a scheduled event. Nil: such payloads fail with ErrBadEvent.
	Sweep func(context.Context) error
}

// Kind is what Classify found a payload to be.
type Kind int

// Payload kinds.
const (
	KindUnknown  Kind = iota
	KindS3            // an S3 event notification ({"Records": [{"eventSource": "aws:s3", ...}]})
	KindSQS           // an SQS event ({"Records": [{"eventSource": "aws:sqs", ...}]})
	KindSchedule      // an EventBridge scheduled event, or {} / null
)

// Classify tells what an invocation payload is.
func Classify(payload []byte) Kind {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		DetailType string `json:"detail-type"`
		Source     string `json:"source"`
	}
	s := strings.TrimSpace(string(payload))
	if s == "" || s == "null" {
		return KindSchedule
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return KindUnknown
	}
	switch {
	case probe.Records != nil:
		if len(probe.Records) == 0 {
			return KindS3 // an empty batch: nothing to do
		}
		switch probe.Records[0].EventSource {
		case SourceS3:
			return KindS3
		case SourceSQS:
			return KindSQS
		}
		return KindUnknown
	case probe.DetailType == "Scheduled Event" || (probe.DetailType == "" && probe.Source == "" && s == "{}"):
		return KindSchedule
	}
	return KindUnknown
}

// Invoke handles one invocation payload: an SQS event (answering events.SQSEventResponse
// with the failed messages), an S3 event (answering nil) or a scheduled event (running
// Sweep, answering nil).
func (h Handler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	switch Classify(payload) {
	case KindSQS:
		if h.S3 == nil {
			return nil, fmt.Errorf("notify: sqs event: this function takes no object notifications: %w", ErrBadEvent)
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("notify: sqs event: %w: %v", ErrBadEvent, err)
		}
		return SQS(h.S3)(ctx, ev)
	case KindS3:
		if h.S3 == nil {
			return nil, fmt.Errorf("notify: s3 event: this function takes no object notifications: %w", ErrBadEvent)
		}
		ev, err := ParseS3Event(payload)
		if err != nil {
			return nil, err
		}
		if len(ev.Records) == 0 {
			return nil, nil
		}
		return nil, h.S3(ctx, ev)
	case KindSchedule:
		if h.Sweep == nil {
			return nil, fmt.Errorf("notify: scheduled event: this function has no sweep: %w", ErrBadEvent)
		}
		return nil, h.Sweep(ctx)
	}
	return nil, fmt.Errorf("notify: payload is not an S3, SQS or scheduled event: %w", ErrBadEvent)
}

package notify

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// awsS3Event is a notification as S3 sends it (shape from the S3 user guide's
// "Event message structure"), for a key with a space, a plus sign and a non-ASCII rune.
const awsS3Event = `{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"eu-west-1",
"eventTime":"2026-11-02T10:00:01.123Z","eventName":"ObjectCreated:Put",
"userIdentity":{"principalId":"AWS:AIDAEXAMPLE"},"requestParameters":{"sourceIPAddress":"10.0.0.1"},
"responseElements":{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"},
"s3":{"s3SchemaVersion":"1.0","configurationId":"wal-created","bucket":{"name":"loam-data","ownerIdentity":{"principalId":"A3NL1KOZZKExample"},"arn":"arn:aws:s3:::loam-data"},
"object":{"key":"wal/standard/node+1/a%2Bb%C3%A9+c.wal","size":4096,"eTag":"d41d8cd98f00b204e9800998ecf8427e","sequencer":"0055AED6DCD90281E5"}}}]}`

func TestParseS3Event(t *testing.T) {
	ev, err := ParseS3Event([]byte(awsS3Event))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := Object{Bucket: "loam-data", Key: "wal/standard/node 1/a+bé c.wal", Size: 4096, ETag: "d41d8cd98f00b204e9800998ecf8427e",
		Sequencer: "0055AED6DCD90281E5", EventName: "ObjectCreated:Put", EventTime: time.Date(2026, 11, 2, 10, 0, 1, 123e6, time.UTC)}
	if len(objs) != 1 || objs[0] != want {
		t.Fatalf("got %+v\nwant %+v", objs, want)
	}
	if !objs[0].Created() || objs[0].ID() != "loam-data/wal/standard/node 1/a+bé c.wal@0055AED6DCD90281E5" {
		t.Fatalf("created %v id %q", objs[0].Created(), objs[0].ID())
	}
}

func TestParseS3EventBad(t *testing.T) {
	for _, s := range []string{
		``, `[]`, `{"Records": 5}`, `{"nothing": 1}`,
		`{"Records":[{"eventSource":"aws:sqs"}]}`,
		`{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"a%zz"}}}]}`,
	} {
		ev, err := ParseS3Event([]byte(s))
		if err == nil {
			_, err = Objects(ev)
		}
		if !errors.Is(err, ErrBadEvent) {
			t.Errorf("%q: err %v, want ErrBadEvent", s, err)
		}
	}
	// No bucket or no key.
	ev, err := ParseS3Event([]byte(`{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":""}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Objects(ev); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("empty key: %v", err)
	}
	// S3's test event has no records and is not an error.
	ev, err = ParseS3Event([]byte(`{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-11-02T10:00:00.000Z","Bucket":"loam-data","RequestId":"5582815E1AEA5ADF","HostId":"8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE"}`))
	if err != nil || len(ev.Records) != 0 {
		t.Fatalf("test event: %+v %v", ev, err)
	}
}

// motoS3Event is what moto_server 5.2.1 sends: no time zone on eventTime, "/" encoded.
const motoS3Event = `{"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1", "eventTime": "2026-11-29T16:29:33.705247", "eventName": "ObjectCreated:Put", "s3": {"s3SchemaVersion": "1.0", "configurationId": "YvKPufOV4T8jPLJmclJa2Kz9Tv1VTEsquf3kPPEzAGwbXxOYyS", "bucket": {"name": "loam-data", "arn": "arn:aws:s3:::loam-data"}, "object": {"key": "wal%2Fa+b.wal", "size": 1, "eTag": "9dd4e461268c8034f5c8564e155c67a6"}}}]}`

func TestParseMotoEvent(t *testing.T) {
	ev, err := ParseS3Event([]byte(motoS3Event))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(ev)
	if err != nil || len(objs) != 1 || objs[0].Key != "wal/a b.wal" || !objs[0].EventTime.Equal(time.Date(2026, 11, 29, 16, 29, 33, 705247000, time.UTC)) {
		t.Fatalf("%+v %v", objs, err)
	}
	if _, err := ParseS3Event([]byte(strings.Replace(motoS3Event, "2026-11-29T16", "yesterday", 1))); !errors.Is(err, ErrBadEvent) {
		t.Fatal(err)
	}
}

func TestKeyCoding(t *testing.T) {
	for _, tc := range []struct{ key, enc string }{
		{"wal/standard/dev-1/01JB.wal", "wal/standard/dev-1/01JB.wal"},
		{"a b+c", "a+b%2Bc"},
		{"x/é/%", "x/%C3%A9/%25"},
		{"seg/1/0/00000000000000000000-01J.seg", "seg/1/0/00000000000000000000-01J.seg"},
	} {
		if got := EncodeKey(tc.key); got != tc.enc {
			t.Errorf("EncodeKey(%q) = %q, want %q", tc.key, got, tc.enc)
		}
		if got, err := DecodeKey(tc.enc); err != nil || got != tc.key {
			t.Errorf("DecodeKey(%q) = %q %v", tc.enc, got, err)
		}
	}
	// Encoded slashes (some producers write them) decode too.
	if got, _ := DecodeKey("wal%2Fa.wal"); got != "wal/a.wal" {
		t.Fatalf("%%2F: %q", got)
	}
}

func TestNewS3EventRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []Object{
		{Bucket: "b", Key: "wal/standard/n 1/x+y.wal", Size: 10, ETag: "e1", Sequencer: "01", EventTime: at},
		{Bucket: "b", Key: "seg/1/2/3-x.seg", Size: 20, ETag: "e2", EventName: "ObjectCreated:CompleteMultipartUpload", EventTime: at},
	}
	b, err := json.Marshal(NewS3Event("us-east-1", in...))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"key":"wal/standard/n+1/x%2By.wal"`) || !strings.Contains(string(b), `"eventSource":"aws:s3"`) {
		t.Fatalf("not S3's shape: %s", b)
	}
	if Classify(b) != KindS3 {
		t.Fatalf("classify: %v", Classify(b))
	}
	ev, err := ParseS3Event(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Objects(ev)
	if err != nil {
		t.Fatal(err)
	}
	in[0].EventName = EventPut
	for i := range in {
		if out[i] != in[i] {
			t.Fatalf("record %d: %+v, want %+v", i, out[i], in[i])
		}
	}
}

func sqsEvent(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: string(rune('a' + i)), Body: b, EventSource: SourceSQS,
			ReceiptHandle: "r", AWSRegion: "us-east-1"})
	}
	return ev
}

func TestSQSWrapper(t *testing.T) {
	var seen []string
	fn := func(ctx context.Context, ev events.S3Event) error {
		objs, err := Objects(ev)
		if err != nil {
			return err
		}
		for _, o := range objs {
			seen = append(seen, o.Key)
			if strings.Contains(o.Key, "fail") {
				return errors.New("boom")
			}
		}
		return nil
	}
	mk := func(key string) string {
		b, _ := json.Marshal(NewS3Event("us-east-1", Object{Bucket: "b", Key: key}))
		return string(b)
	}
	sns, _ := json.Marshal(map[string]string{"Type": "Notification", "MessageId": "m", "Message": mk("wal/sns.wal")})
	resp, err := SQS(fn)(context.Background(), sqsEvent(
		mk("wal/1.wal"),
		mk("wal/fail.wal"),
		`not json`,
		`{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"b"}`,
		string(sns),
		mk("wal/2 x.wal"),
	))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if strings.Join(failed, ",") != "b,c" {
		t.Fatalf("failures %v, want b (handler) and c (bad body)", failed)
	}
	if strings.Join(seen, ",") != "wal/1.wal,wal/fail.wal,wal/sns.wal,wal/2 x.wal" {
		t.Fatalf("seen %v", seen)
	}
}

func TestInvoke(t *testing.T) {
	var s3calls, sweeps int
	h := Handler{
		S3:    func(context.Context, events.S3Event) error { s3calls++; return nil },
		Sweep: func(context.Context) error { sweeps++; return nil },
	}
	s3b, _ := json.Marshal(NewS3Event("us-east-1", Object{Bucket: "b", Key: "wal/k.wal"}))
	sqsb, _ := json.Marshal(sqsEvent(string(s3b), string(s3b)))
	sched := `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event","source":"aws.events",
"account":"123456789012","time":"2026-11-02T10:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:123456789012:rule/gc"],"detail":{}}`
	ctx := context.Background()
	if out, err := h.Invoke(ctx, s3b); err != nil || out != nil || s3calls != 1 {
		t.Fatalf("s3: %v %v %d", out, err, s3calls)
	}
	out, err := h.Invoke(ctx, sqsb)
	if resp, ok := out.(events.SQSEventResponse); err != nil || !ok || len(resp.BatchItemFailures) != 0 || s3calls != 3 {
		t.Fatalf("sqs: %v %v %d", out, err, s3calls)
	}
	for _, p := range []string{sched, `{}`, ``, `null`} {
		if _, err := h.Invoke(ctx, json.RawMessage(p)); err != nil {
			t.Fatalf("schedule %q: %v", p, err)
		}
	}
	if sweeps != 4 {
		t.Fatalf("sweeps %d", sweeps)
	}
	for _, p := range []string{`{"Records":[{"EventSource":"aws:sns"}]}`, `[1]`, `{"detail-type":"Object Created"}`, `{`} {
		if _, err := h.Invoke(ctx, json.RawMessage(p)); !errors.Is(err, ErrBadEvent) {
			t.Fatalf("%q: %v", p, err)
		}
	}
	// A function without a sweep refuses schedules, one without S3 handling refuses events.
	if _, err := (Handler{S3: h.S3}).Invoke(ctx, json.RawMessage(`{}`)); !errors.Is(err, ErrBadEvent) {
		t.Fatal(err)
	}
	if _, err := (Handler{Sweep: h.Sweep}).Invoke(ctx, sqsb); !errors.Is(err, ErrBadEvent) {
		t.Fatal(err)
	}
}

func FuzzParseS3Event(f *testing.F) {
	f.Add([]byte(awsS3Event))
	f.Add([]byte(`{"Records":[]}`))
	f.Add([]byte(`{"Event":"s3:TestEvent"}`))
	f.Add([]byte(motoS3Event))
	f.Add([]byte(`{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"%"}}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := ParseS3Event(b)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("error %v does not match ErrBadEvent", err)
			}
			return
		}
		objs, err := Objects(ev)
		if err != nil {
			return
		}
		// What decodes re-encodes to an event that decodes to the same objects.
		b2, err := json.Marshal(NewS3Event("r", objs...))
		if err != nil {
			t.Fatal(err)
		}
		ev2, err := ParseS3Event(b2)
		if err != nil {
			t.Fatal(err)
		}
		objs2, err := Objects(ev2)
		if err != nil || len(objs2) != len(objs) {
			t.Fatalf("%v %d/%d", err, len(objs2), len(objs))
		}
		for i := range objs {
			if !utf8.ValidString(objs[i].Key) || !utf8.ValidString(objs[i].Bucket) {
				continue // JSON carries only UTF-8: S3 keys are UTF-8
			}
			if objs2[i].Key != objs[i].Key || objs2[i].Bucket != objs[i].Bucket {
				t.Fatalf("record %d: %+v vs %+v", i, objs2[i], objs[i])
			}
		}
	})
}

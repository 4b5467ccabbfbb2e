// Package notify is the event plumbing of Loam's functions:
// the AWS S3 event notification shape, the same events wrapped in SQS messages, scheduled
// (EventBridge) invocations, and an SQS poller that drains a queue into a handler exactly as
// Lambda's SQS event source does.
//
// # Basics
//
// S3 sends one JSON document per notification: {"Records": [{"eventSource": "aws:s3",
// "eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": ...}, "object": {"key": ...,
// "size": ..., "eTag": ..., "sequencer": ...}}}]}. Object keys in it are URL-encoded the way
// an HTML form is (a space is "+", other reserved bytes "%XX", "/" kept): Objects decodes
// them, EncodeKey and NewS3Event produce them, so the embedded cluster (loam dev) feeds the
// handlers byte for byte what S3 would.
//
// Delivered through SQS, each message body is one such document (or S3's s3:TestEvent, sent
// once when a notification configuration is set, or an SNS envelope whose Message is the
// document). SQS turns a handler of S3 events into a handler of SQS events that reports
// partial batch failures (events.SQSEventResponse): a message whose S3 event failed is
// named and redelivered, the others are deleted.
//
// Handler.Invoke takes any invocation payload and routes it: an SQS event, an S3 event, or
// a scheduled event (EventBridge "Scheduled Event", or an empty object) that runs the sweep.
// The Lambda mains in functions/ pass it to lambda.Start; loam dev calls it with the JSON it
// builds.
//
// Poller receives from an SQS queue (long polling, up to ten messages), builds the
// events.SQSEvent Lambda would, invokes the handler, then deletes the messages that
// succeeded: every message when the handler returned no error and reported no failure, none
// when it returned an error, all but the reported ones otherwise. Messages it does not delete
// become visible again after the queue's visibility timeout and are redelivered: at least
// once, possibly out of order, as with Lambda.
//
// # Caveats
//
//   - Delivery is at least once. Handlers dedupe by Object.ID (bucket, key and sequencer)
//     in the coordination store and must be idempotent anyway.
//   - A body that is not an S3 event (nor a test event or SNS envelope) is reported as a
//     failed message, so the queue's redrive policy moves it to its dead-letter queue rather
//     than it vanishing; without a redrive policy it is redelivered forever.
//   - The poller runs one batch at a time (Lambda runs several concurrent pollers); run
//     several Pollers for more throughput.
//   - S3 event sequencers order events of one key only; they are compared as hex strings of
//     possibly different lengths (pad the shorter on the right with zeros, per AWS).
package notify

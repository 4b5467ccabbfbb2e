// Package events holds sample invocation payloads of the four functions, one JSON file per
// trigger, for `sam local invoke -e` and for tests:
//
//	segmenter-sqs.json    the segmenter's queue mapping: an SQS batch of one wal/
//	                      object-created notification (what Lambda's SQS event source sends)
//	segmenter-s3.json     the same notification delivered by S3 directly
//	<function>-sweep.json a sweep, as the Terraform module's EventBridge Scheduler
//	                      schedules send it (for segmenter, retention, compaction, gc)
//	sam-env.json          `sam local invoke --env-vars`: every function pointed at
//	                      `loam dev --aws http://127.0.0.1:5000`
//
// functions/<function>/event.json are the EventBridge rule events SAM's Schedule trigger
// sends (and, for the segmenter, the SQS batch). The package's test invokes every file through
// the real handler of its function.
package events

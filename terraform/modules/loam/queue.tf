# The queue between the bucket's wal/ object-created notifications and the segmenter function.
# Notifications arrive at least once and out of order; the functions record what they handled
# in the coordination table. A notification that keeps failing lands in the dead-letter queue.

resource "aws_sqs_queue" "wal_events_dlq" {
  name                      = "${var.name}-wal-events-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = local.tags
}

resource "aws_sqs_queue" "wal_events" {
  name                       = "${var.name}-wal-events"
  visibility_timeout_seconds = var.queue_visibility_timeout_seconds
  message_retention_seconds  = var.queue_message_retention_seconds
  receive_wait_time_seconds  = 20
  # SSE-SQS: S3 can publish to it without a KMS key policy (it cannot use the aws/sqs key).
  sqs_managed_sse_enabled = true

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.wal_events_dlq.arn
    maxReceiveCount     = var.queue_max_receive_count
  })

  tags = local.tags
}

resource "aws_sqs_queue_redrive_allow_policy" "wal_events_dlq" {
  count = contains(var.emulator_unsupported, "sqs_redrive_allow_policy") ? 0 : 1

  queue_url = aws_sqs_queue.wal_events_dlq.id

  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.wal_events.arn]
  })
}

data "aws_iam_policy_document" "wal_events_queue" {
  statement {
    sid       = "AllowWalNotificationsFromDataBucket"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.wal_events.arn]

    principals {
      type        = "Service"
      identifiers = ["s3.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_s3_bucket.data.arn]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_sqs_queue_policy" "wal_events" {
  queue_url = aws_sqs_queue.wal_events.id
  policy    = data.aws_iam_policy_document.wal_events_queue.json
}

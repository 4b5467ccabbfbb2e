# The data bucket: WAL objects (wal/<class>/<node>/<ulid>.wal), segments and wrapped namespace
# keys. Versioning stays off: every object is written once with If-None-Match: * and deleted
# only by GC after its grace period, so old versions would only keep deleted data billable.

resource "aws_s3_bucket" "data" {
  bucket        = var.bucket_name
  bucket_prefix = var.bucket_name == null ? "${var.name}-data-" : null
  force_destroy = var.bucket_force_destroy
  tags          = local.tags
}

resource "aws_s3_bucket_ownership_controls" "data" {
  bucket = aws_s3_bucket.data.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "data" {
  bucket                  = aws_s3_bucket.data.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_versioning" "data" {
  bucket = aws_s3_bucket.data.id

  versioning_configuration {
    status = "Disabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "data" {
  bucket = aws_s3_bucket.data.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.bucket_sse_algorithm
      kms_master_key_id = local.bucket_kms_key_arn
    }
    # S3 Bucket Keys cut KMS requests (and cost) for SSE-KMS; they do nothing for SSE-S3.
    bucket_key_enabled = var.bucket_sse_algorithm == "aws:kms"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "data" {
  bucket = aws_s3_bucket.data.id

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"

    filter {}

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }
  }
}

data "aws_iam_policy_document" "bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.data.arn, "${aws_s3_bucket.data.arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "data" {
  bucket = aws_s3_bucket.data.id
  policy = data.aws_iam_policy_document.bucket.json

  # A bucket policy put before the public access block exists can race it.
  depends_on = [aws_s3_bucket_public_access_block.data]
}

# Every WAL object created fires the segmenter through the queue. This resource owns all
# notifications of the bucket: the functions attach to the queue, never to the bucket.
resource "aws_s3_bucket_notification" "data" {
  bucket = aws_s3_bucket.data.id

  queue {
    id            = "wal-object-created"
    queue_arn     = aws_sqs_queue.wal_events.arn
    events        = ["s3:ObjectCreated:*"]
    filter_prefix = "wal/"
  }

  # S3 checks at configuration time that it may send to the queue.
  depends_on = [aws_sqs_queue_policy.wal_events]
}

# The coordination table of the serverless side (decision 2): node registry with TTL heartbeats,
# handled-notification records, work accounting and the GC schedule, in one table keyed by
# pk/sk strings. Never a second source of truth: a sweep rebuilds it from the sequencer and the
# bucket. TTL deletes items whose expires_at (epoch seconds, a Number) has passed.

resource "aws_dynamodb_table" "coord" {
  name                        = "${var.name}-coord"
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.table_deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "sk"
    type = "S"
  }

  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  # Without a key ARN DynamoDB uses its AWS-owned key (encryption at rest is always on).
  server_side_encryption {
    enabled     = local.kms_key_arn != null
    kms_key_arn = local.kms_key_arn
  }

  tags = local.tags
}

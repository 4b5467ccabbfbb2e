# The deployment's KMS key: the data bucket's SSE-KMS key (with S3 Bucket Keys, so objects
# cost one KMS request per bucket key, not per object) and the coordination table's key.
# Bring your own with kms_key_arn; create_kms_key = false and no kms_key_arn falls back to
# AWS-managed keys. Access is granted through the roles' policies (log nodes, functions);
# the key policy delegates to IAM in this account, as the default key policy does.

resource "aws_kms_key" "data" {
  count = local.create_kms_key ? 1 : 0

  description             = "Loam ${var.name}: data bucket and coordination table"
  enable_key_rotation     = true
  deletion_window_in_days = var.kms_deletion_window_days
  tags                    = local.tags
}

resource "aws_kms_alias" "data" {
  count = local.create_kms_key ? 1 : 0

  name          = "alias/${var.name}-data"
  target_key_id = aws_kms_key.data[0].key_id
}

locals {
  create_kms_key = var.create_kms_key && var.kms_key_arn == null
  # The customer-managed key in use (given or created), or null for AWS-managed keys.
  kms_key_arn = var.kms_key_arn != null ? var.kms_key_arn : (local.create_kms_key ? aws_kms_key.data[0].arn : null)
  # The bucket uses it only under SSE-KMS.
  bucket_kms_key_arn = var.bucket_sse_algorithm == "aws:kms" ? local.kms_key_arn : null
}

# Namespace keys (docs/encryption.md): the log node task role's use of the customer-managed
# KMS keys that seal namespaces' chunks (envelope encryption). Run the log nodes with
# LOAM_KMS=aws (lognode_extra_environment) to turn it on.
#
# The segmenter and compaction functions open keyed namespaces' sealed chunks and segments
# and seal their segments (sealed pages under ns/<id>/seg/): with namespace_keys_enabled
# they run with LOAM_KMS=aws and their roles may use the same keys, under the same
# encryption-context condition. With namespace_segment_sse_kms each sealed segment's PUT
# also asks S3 for SSE-KMS with the namespace's key, so S3 calls KMS for the writer and
# every reader: the functions and the log nodes may use the keys through S3 too
# (kms:ViaService). Without namespace_keys_enabled the functions leave keyed namespaces'
# partitions in the WAL (never segmented in clear).
#
# `loam namespace create --encrypt` has a log node create the namespace's key, tagged
# loam:namespace=<name>, with the default key policy (the account administers it and
# delegates to IAM), so this policy governs its use: data keys only under an encryption
# context that names a namespace (kms:EncryptionContext:loam:namespace, which the log nodes
# always send), and disable and schedule-deletion (`loam namespace shred`) only of keys
# tagged loam:namespace. A key brought with --kms-key ARN needs a key policy that grants
# this role kms:GenerateDataKey and kms:Decrypt (docs/encryption.md has one), and
# kms:DisableKey and kms:ScheduleKeyDeletion for shred.

data "aws_iam_policy_document" "lognode_namespace_keys" {
  statement {
    sid       = "CreateNamespaceKeys"
    actions   = ["kms:CreateKey", "kms:TagResource"]
    resources = ["*"]
    condition {
      test     = "Null"
      variable = "aws:RequestTag/loam:namespace"
      values   = ["false"]
    }
  }

  statement {
    sid       = "NamespaceDataKeys"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = ["arn:${data.aws_partition.current.partition}:kms:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:key/*"]
    condition {
      test     = "Null"
      variable = "kms:EncryptionContext:loam:namespace"
      values   = ["false"]
    }
  }

  statement {
    sid       = "ShredTaggedNamespaceKeys"
    actions   = ["kms:DisableKey", "kms:ScheduleKeyDeletion", "kms:DescribeKey"]
    resources = ["arn:${data.aws_partition.current.partition}:kms:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:key/*"]
    condition {
      test     = "Null"
      variable = "aws:ResourceTag/loam:namespace"
      values   = ["false"]
    }
  }
}

resource "aws_iam_role_policy" "lognode_namespace_keys" {
  name   = "loam-lognode-namespace-keys"
  role   = aws_iam_role.lognode_task.id
  policy = data.aws_iam_policy_document.lognode_namespace_keys.json
}

locals {
  # The functions that rewrite data and so need the namespace keys.
  namespace_key_functions = ["segmenter", "compaction"]
  namespace_key_function_environment = {
    for name in keys(local.functions) : name => {
      for k, v in {
        LOAM_KMS             = "aws"
        LOAM_SEGMENT_SSE_KMS = var.namespace_segment_sse_kms ? "true" : "false"
      } : k => v if var.namespace_keys_enabled && contains(local.namespace_key_functions, name)
    }
  }
  namespace_key_arns = "arn:${data.aws_partition.current.partition}:kms:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:key/*"
}

data "aws_iam_policy_document" "function_namespace_keys" {
  statement {
    sid       = "NamespaceDataKeys"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [local.namespace_key_arns]
    condition {
      test     = "Null"
      variable = "kms:EncryptionContext:loam:namespace"
      values   = ["false"]
    }
  }

  dynamic "statement" {
    for_each = var.namespace_segment_sse_kms ? [1] : []
    content {
      sid       = "NamespaceSegmentsSSEKMS"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = [local.namespace_key_arns]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.region}.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_role_policy" "function_namespace_keys" {
  for_each = var.namespace_keys_enabled ? toset(local.namespace_key_functions) : toset([])

  name   = "loam-${each.key}-namespace-keys"
  role   = aws_iam_role.function[each.key].id
  policy = data.aws_iam_policy_document.function_namespace_keys.json
}

# The log nodes read SSE-KMS segments through S3, which decrypts with the namespace's key
# on their behalf.
data "aws_iam_policy_document" "lognode_namespace_segments" {
  statement {
    sid       = "NamespaceSegmentsSSEKMS"
    actions   = ["kms:Decrypt"]
    resources = [local.namespace_key_arns]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["s3.${data.aws_region.current.region}.amazonaws.com"]
    }
  }
}

resource "aws_iam_role_policy" "lognode_namespace_segments" {
  count = var.namespace_keys_enabled && var.namespace_segment_sse_kms ? 1 : 0

  name   = "loam-lognode-namespace-segments"
  role   = aws_iam_role.lognode_task.id
  policy = data.aws_iam_policy_document.lognode_namespace_segments.json
}

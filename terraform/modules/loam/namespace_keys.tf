# Namespace keys (docs/encryption.md): the log node task role's use of the customer-managed
# KMS keys that seal namespaces' chunks (envelope encryption). Run the log nodes with
# LOAM_KMS=aws (lognode_extra_environment) to turn it on.
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

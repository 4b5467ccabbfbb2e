# IAM, least privilege. Log nodes: objects in the data bucket and items in the coordination
# table, nothing else. Sequencer voters: their log group, image pulls, and their backups under
# backups/sequencer/ in the data bucket; nothing on DynamoDB (the sequencer keeps its state on
# its own EBS volume). Image pulls are limited to
# the image's ECR repository; ecr:GetAuthorizationToken has no resource-level form.

# --- log node task role (what lognode-svc itself may do) -------------------------------------

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "lognode_task" {
  name               = "${var.name}-lognode-task"
  description        = "Loam log nodes: data bucket objects and coordination table items"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "lognode_task" {
  statement {
    sid       = "ListDataBucket"
    actions   = ["s3:ListBucket", "s3:ListBucketMultipartUploads"]
    resources = [aws_s3_bucket.data.arn]
  }

  statement {
    sid = "DataBucketObjects"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
      "s3:ListMultipartUploadParts",
    ]
    resources = ["${aws_s3_bucket.data.arn}/*"]
  }

  statement {
    sid = "CoordinationTable"
    actions = [
      "dynamodb:DescribeTable",
      "dynamodb:GetItem",
      "dynamodb:BatchGetItem",
      "dynamodb:Query",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:DeleteItem",
      "dynamodb:BatchWriteItem",
      "dynamodb:ConditionCheckItem",
    ]
    resources = [aws_dynamodb_table.coord.arn, "${aws_dynamodb_table.coord.arn}/index/*"]
  }

  dynamic "statement" {
    for_each = local.kms_key_arn == null ? [] : [local.kms_key_arn]

    content {
      sid       = "DataKeys"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "lognode_task" {
  name   = "loam-lognode"
  role   = aws_iam_role.lognode_task.id
  policy = data.aws_iam_policy_document.lognode_task.json
}

# --- log node execution role (what ECS does to start the task) -------------------------------

resource "aws_iam_role" "lognode_execution" {
  name               = "${var.name}-lognode-execution"
  description        = "ECS agent for Loam log nodes: image pull and log delivery"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "lognode_execution" {
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.lognode.arn}:*"]
  }

  dynamic "statement" {
    for_each = contains(keys(local.ecr_repository_arns), "lognode") ? [local.ecr_repository_arns["lognode"]] : []

    content {
      sid       = "PullImage"
      actions   = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = contains(keys(local.ecr_repository_arns), "lognode") ? [1] : []

    content {
      sid       = "RegistryToken"
      actions   = ["ecr:GetAuthorizationToken"]
      resources = ["*"]
    }
  }
}

resource "aws_iam_role_policy" "lognode_execution" {
  name   = "loam-lognode-execution"
  role   = aws_iam_role.lognode_execution.id
  policy = data.aws_iam_policy_document.lognode_execution.json
}

# --- sequencer instance role ----------------------------------------------------------------

data "aws_iam_policy_document" "ec2_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "sequencer" {
  name               = "${var.name}-sequencer"
  description        = "Loam sequencer voters: log delivery, image pull, backups/sequencer/ in the data bucket"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "sequencer" {
  # Backups of the state machine: backups/sequencer/ in the data bucket, nothing else.
  statement {
    sid       = "ListBackups"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.data.arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["backups/sequencer/*"]
    }
  }

  statement {
    sid       = "Backups"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.data.arn}/backups/sequencer/*"]
  }

  dynamic "statement" {
    for_each = local.bucket_kms_key_arn == null ? [] : [local.bucket_kms_key_arn]

    content {
      sid       = "BackupKeys"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
    }
  }

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
    resources = ["${aws_cloudwatch_log_group.sequencer.arn}:*"]
  }

  dynamic "statement" {
    for_each = contains(keys(local.ecr_repository_arns), "sequencer") ? [local.ecr_repository_arns["sequencer"]] : []

    content {
      sid       = "PullImage"
      actions   = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = contains(keys(local.ecr_repository_arns), "sequencer") ? [1] : []

    content {
      sid       = "RegistryToken"
      actions   = ["ecr:GetAuthorizationToken"]
      resources = ["*"]
    }
  }
}

resource "aws_iam_role_policy" "sequencer" {
  name   = "loam-sequencer"
  role   = aws_iam_role.sequencer.id
  policy = data.aws_iam_policy_document.sequencer.json
}

resource "aws_iam_role_policy_attachment" "sequencer_ssm" {
  count      = var.sequencer_enable_ssm && !contains(var.emulator_unsupported, "aws_managed_policies") ? 1 : 0
  role       = aws_iam_role.sequencer.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "sequencer" {
  name = "${var.name}-sequencer"
  role = aws_iam_role.sequencer.name
  tags = local.tags
}

# --- functions -------------------------------------------------------------------------------

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "function" {
  for_each = local.functions

  name               = "${var.name}-${each.key}"
  description        = "Loam ${each.key} function: data bucket objects, coordination table items, its log group, VPC access"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "function" {
  for_each = local.functions

  statement {
    sid       = "ListDataBucket"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.data.arn]
  }

  statement {
    sid       = "DataBucketObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = ["${aws_s3_bucket.data.arn}/*"]
  }

  statement {
    sid = "CoordinationTable"
    actions = [
      "dynamodb:DescribeTable",
      "dynamodb:GetItem",
      "dynamodb:Query",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:DeleteItem",
      "dynamodb:ConditionCheckItem",
    ]
    resources = [aws_dynamodb_table.coord.arn]
  }

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.function[each.key].arn}:*"]
  }

  # Lambda attaches the function's network interfaces in the VPC; these actions have no
  # resource-level form (AWSLambdaVPCAccessExecutionRole grants the same).
  statement {
    sid = "VPCAccess"
    actions = [
      "ec2:CreateNetworkInterface",
      "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeSubnets",
      "ec2:DeleteNetworkInterface",
      "ec2:AssignPrivateIpAddresses",
      "ec2:UnassignPrivateIpAddresses",
    ]
    resources = ["*"]
  }

  dynamic "statement" {
    for_each = each.key == "segmenter" ? [1] : []

    content {
      sid       = "WalEventsQueue"
      actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"]
      resources = [aws_sqs_queue.wal_events.arn]
    }
  }

  dynamic "statement" {
    for_each = local.kms_key_arn == null ? [] : [local.kms_key_arn]

    content {
      sid       = "DataKeys"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "function" {
  for_each = local.functions

  name   = "loam-${each.key}"
  role   = aws_iam_role.function[each.key].id
  policy = data.aws_iam_policy_document.function[each.key].json
}

# --- EventBridge Scheduler: invoke the functions' sweeps -----------------------------------------

data "aws_iam_policy_document" "scheduler_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "scheduler" {
  name               = "${var.name}-scheduler"
  description        = "EventBridge Scheduler: invokes the Loam functions' sweeps"
  assume_role_policy = data.aws_iam_policy_document.scheduler_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    sid     = "InvokeSweeps"
    actions = ["lambda:InvokeFunction"]
    resources = [
      aws_lambda_function.function["segmenter"].arn,
      aws_lambda_function.function["retention"].arn,
      aws_lambda_function.function["compaction"].arn,
      aws_lambda_function.function["gc"].arn,
    ]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name   = "loam-scheduler"
  role   = aws_iam_role.scheduler.id
  policy = data.aws_iam_policy_document.scheduler.json
}

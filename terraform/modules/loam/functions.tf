# The four background functions (segmenter, retention, compaction, gc) as Lambda functions in
# the VPC, beside the sequencer they call. Each is a provided.al2023 zip built by
# functions/build.sh (DIR/<function>-<arm64 or amd64>.zip, var.functions_dir). Object-created
# notifications for wal/ reach the segmenter through the queue (batched, with partial batch
# responses, so one bad message is retried alone and lands in the dead-letter queue after
# var.queue_max_receive_count tries); EventBridge Scheduler fires every function's sweep.

locals {
  functions = {
    segmenter = {
      description = "Rewrites partitions' WAL chunks into segments"
      memory      = 2048 # a segment is built in memory: the target size plus a chunk
      timeout     = 300
      environment = {
        LOAM_SEGMENT_TARGET_BYTES = var.segment_target_bytes
        LOAM_SEGMENT_MAX_AGE      = var.segment_max_age
      }
    }
    retention = {
      description = "Time and size retention, metadata first"
      memory      = 256
      timeout     = 300
      environment = {}
    }
    compaction = {
      description = "Keeps the latest record per key of compacted streams"
      memory      = 3008
      timeout     = 900
      environment = {
        LOAM_TOMBSTONE_RETENTION  = var.tombstone_retention
        LOAM_SEGMENT_TARGET_BYTES = var.segment_target_bytes
      }
    }
    gc = {
      description = "Deletes retired objects after grace, and orphans"
      memory      = 256
      timeout     = 300
      environment = {
        LOAM_GC_GRACE = var.gc_grace
      }
    }
  }

  # Environment every function reads (functions/internal/fnenv), merged last so a function's
  # own settings cannot override the wiring.
  function_environment = {
    for name, fn in local.functions : name => merge(fn.environment, local.express_function_environment, local.function_identity_environment, local.namespace_key_function_environment[name], {
      LOAM_BUCKET      = local.bucket_url
      LOAM_SEQUENCER   = join(",", local.sequencer_rpc_addresses)
      LOAM_COORD_TABLE = aws_dynamodb_table.coord.name
      LOAM_LOG_LEVEL   = var.functions_log_level
    })
  }

  # functions/build.sh names a zip by Go's architecture (amd64), Lambda by its own (x86_64).
  function_goarch = var.architecture == "x86_64" ? "amd64" : var.architecture
  function_zip    = { for name in keys(local.functions) : name => "${var.functions_dir}/${name}-${local.function_goarch}.zip" }
}

resource "aws_cloudwatch_log_group" "function" {
  for_each = local.functions

  name              = "/aws/lambda/${var.name}-${each.key}"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_lambda_function" "function" {
  for_each = local.functions

  function_name    = "${var.name}-${each.key}"
  description      = "Loam ${each.key}: ${each.value.description}"
  role             = aws_iam_role.function[each.key].arn
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = local.function_zip[each.key]
  source_code_hash = filebase64sha256(local.function_zip[each.key])
  memory_size      = each.value.memory
  timeout          = each.value.timeout
  tags             = local.tags

  environment {
    variables = local.function_environment[each.key]
  }

  vpc_config {
    subnet_ids         = values(var.subnet_ids)
    security_group_ids = [aws_security_group.functions.id]
  }

  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.function[each.key].name
  }

  lifecycle {
    precondition {
      condition     = fileexists(local.function_zip[each.key])
      error_message = "${local.function_zip[each.key]} does not exist: build the functions first (functions/build.sh -o ${var.functions_dir})."
    }
  }

  depends_on = [aws_iam_role_policy.function]
}

# --- the segmenter's queue ---------------------------------------------------------------------

resource "aws_lambda_event_source_mapping" "segmenter" {
  event_source_arn                   = aws_sqs_queue.wal_events.arn
  function_name                      = aws_lambda_function.function["segmenter"].arn
  batch_size                         = var.segmenter_batch_size
  maximum_batching_window_in_seconds = var.segmenter_batching_window_seconds
  function_response_types            = ["ReportBatchItemFailures"]
  tags                               = local.tags

  scaling_config {
    maximum_concurrency = var.segmenter_max_concurrency
  }

  lifecycle {
    precondition {
      # Lambda's guidance for SQS sources: a visibility timeout of at least six times the
      # function's timeout, so a message is not redelivered while a run still holds it.
      condition     = var.queue_visibility_timeout_seconds >= local.functions.segmenter.timeout
      error_message = "queue_visibility_timeout_seconds must be at least the segmenter's timeout (${local.functions.segmenter.timeout} s); six times it is Lambda's guidance."
    }
  }
}

# --- sweeps ---------------------------------------------------------------------------------

resource "aws_scheduler_schedule_group" "this" {
  name = var.name
  tags = local.tags
}

resource "aws_scheduler_schedule" "sweep" {
  for_each = var.sweep_schedules

  name                = "${var.name}-${each.key}"
  group_name          = aws_scheduler_schedule_group.this.name
  description         = "Fires the ${each.key} function's sweep"
  schedule_expression = each.value

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.function[each.key].arn
    role_arn = aws_iam_role.scheduler.arn
    # The functions classify a payload with detail-type "Scheduled Event" as a sweep.
    input = jsonencode({ "detail-type" = "Scheduled Event", source = "aws.scheduler" })

    retry_policy {
      maximum_retry_attempts       = 0 # the next tick is the retry
      maximum_event_age_in_seconds = 60
    }
  }
}

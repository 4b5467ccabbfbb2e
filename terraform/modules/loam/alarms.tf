# CloudWatch alarms, each notifying var.alarm_topic_arns (none: the alarms still show state in
# the console):
# - no sequencer voter leads (the sum of the voters' Leader metric stays below 1): commits stop;
# - commit latency: the log nodes' mean CommitWal latency over alarm_commit_latency_ms;
# - the wal/ dead-letter queue holds messages: notifications the segmenter failed five times
#   (its data stays readable from the WAL; redrive it once the cause is fixed);
# - a function reports errors in consecutive periods.

locals {
  alarms = !contains(var.emulator_unsupported, "cloudwatch_alarms")
}

resource "aws_cloudwatch_metric_alarm" "sequencer_leader_absent" {
  count = local.alarms ? 1 : 0

  alarm_name          = "${var.name}-sequencer-leader-absent"
  alarm_description   = "No sequencer voter of ${var.name} has been the Raft leader for 3 minutes: produce and every metadata change stop. Check the voters' logs (/loam/${var.name}/sequencer) and that a majority of them run."
  namespace           = local.metric_namespace
  metric_name         = "Leader"
  dimensions          = { Deployment = var.name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  # Voters that publish nothing lead nothing.
  treat_missing_data = "breaching"
  alarm_actions      = var.alarm_topic_arns
  ok_actions         = var.alarm_topic_arns
  tags               = local.tags
}

resource "aws_cloudwatch_metric_alarm" "commit_latency" {
  for_each = local.alarms ? var.subnet_ids : {}

  alarm_name          = "${var.name}-commit-latency-${each.key}"
  alarm_description   = "Log nodes of ${var.name} in ${each.key} see a mean CommitWal latency above ${var.alarm_commit_latency_ms} ms for 5 minutes: produce acknowledgements slow down with it."
  namespace           = local.metric_namespace
  metric_name         = "CommitLatency"
  dimensions          = { Deployment = var.name, Zone = each.key }
  statistic           = "Average"
  period              = 60
  evaluation_periods  = 5
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alarm_commit_latency_ms
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_topic_arns
  ok_actions          = var.alarm_topic_arns
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  count = local.alarms ? 1 : 0

  alarm_name          = "${var.name}-wal-events-dead-letters"
  alarm_description   = "WAL-created notifications of ${var.name} reached the dead-letter queue: the segmenter failed them ${var.queue_max_receive_count} times. Their data stays readable from the WAL; fix the cause (segmenter logs) and redrive the queue."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.wal_events_dlq.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_topic_arns
  ok_actions          = var.alarm_topic_arns
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "function_errors" {
  for_each = local.alarms ? local.functions : {}

  alarm_name          = "${var.name}-${each.key}-errors"
  alarm_description   = "The ${each.key} function of ${var.name} reported errors in 3 consecutive 5-minute periods (its log group: /aws/lambda/${var.name}-${each.key})."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.function[each.key].function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_topic_arns
  ok_actions          = var.alarm_topic_arns
  tags                = local.tags
}

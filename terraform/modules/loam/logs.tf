resource "aws_cloudwatch_log_group" "sequencer" {
  name              = "/loam/${var.name}/sequencer"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "lognode" {
  name              = "/loam/${var.name}/lognode"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

# The express durability class (docs/express.md): three S3 Express One Zone directory buckets,
# one per zone of var.express_zones, which the log nodes write each express WAL object to
# (acknowledged once two hold it) and the segmenter and GC read and delete. Directory buckets
# send no S3 event notifications, so the log nodes notify the segmenter's queue themselves
# (LOAM_EXPRESS_NOTIFY_QUEUE, delayed by the segmenter's express age). moto has no directory
# buckets: emulator_unsupported = ["express_directory_buckets"] leaves them out.

locals {
  express         = length(var.express_zones) == 3 && !contains(var.emulator_unsupported, "express_directory_buckets")
  express_zone_id = local.express ? zipmap(data.aws_availability_zones.express[0].names, data.aws_availability_zones.express[0].zone_ids) : {}
  express_buckets = local.express ? [for z in var.express_zones : aws_s3_directory_bucket.express[z].bucket] : []

  express_lognode_environment = local.express ? {
    LOAM_EXPRESS_BUCKETS      = join(",", [for b in local.express_buckets : "s3://${b}?region=${local.region}"])
    LOAM_EXPRESS_ZONES        = join(",", var.express_zones)
    LOAM_EXPRESS_NOTIFY_QUEUE = aws_sqs_queue.wal_events.url
  } : {}
  express_function_environment = local.express ? {
    LOAM_EXPRESS_BUCKETS = join(",", [for b in local.express_buckets : "s3://${b}?region=${local.region}"])
    LOAM_EXPRESS_ZONES   = join(",", var.express_zones)
  } : {}
}

data "aws_availability_zones" "express" {
  count = local.express ? 1 : 0
  state = "available"
}

resource "aws_s3_directory_bucket" "express" {
  for_each = local.express ? toset(var.express_zones) : toset([])

  # Directory bucket names are base--zoneid--x-s3.
  bucket        = "${var.name}-express--${local.express_zone_id[each.key]}--x-s3"
  force_destroy = var.bucket_force_destroy
  type          = "Directory"

  location {
    name = local.express_zone_id[each.key]
    type = "AvailabilityZone"
  }
}

# Directory buckets authorise by bucket: s3express:CreateSession grants a session whose
# object calls (PUT, GET, DELETE, LIST) the bucket allows.
data "aws_iam_policy_document" "express" {
  count = local.express ? 1 : 0

  statement {
    sid     = "ExpressBuckets"
    actions = ["s3express:CreateSession"]
    resources = [
      aws_s3_directory_bucket.express[var.express_zones[0]].arn,
      aws_s3_directory_bucket.express[var.express_zones[1]].arn,
      aws_s3_directory_bucket.express[var.express_zones[2]].arn,
    ]
  }
}

resource "aws_iam_role_policy" "lognode_express" {
  count = local.express ? 1 : 0

  name   = "loam-lognode-express"
  role   = aws_iam_role.lognode_task.id
  policy = data.aws_iam_policy_document.express[0].json
}

# The log nodes send the segmenter's queue the notifications directory buckets do not.
data "aws_iam_policy_document" "lognode_express_notify" {
  count = local.express ? 1 : 0

  statement {
    sid       = "ExpressNotify"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.wal_events.arn]
  }
}

resource "aws_iam_role_policy" "lognode_express_notify" {
  count = local.express ? 1 : 0

  name   = "loam-lognode-express-notify"
  role   = aws_iam_role.lognode_task.id
  policy = data.aws_iam_policy_document.lognode_express_notify[0].json
}

resource "aws_iam_role_policy" "function_express" {
  for_each = local.express ? toset(["segmenter", "gc", "compaction"]) : toset([])

  name   = "loam-${each.key}-express"
  role   = aws_iam_role.function[each.key].id
  policy = data.aws_iam_policy_document.express[0].json
}

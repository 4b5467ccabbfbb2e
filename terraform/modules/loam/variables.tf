# Inputs of the Loam module. Networking is an input: the VPC, its private subnets (one per
# availability zone) and their route to AWS APIs (a NAT gateway, or the interface endpoints
# vpc_interface_endpoints creates) belong to the caller; the module adds the S3 and DynamoDB
# gateway endpoints (endpoints.tf).

variable "name" {
  description = "Name of this Loam deployment. Prefixes every resource name (bucket, table, queue, roles, cluster, load balancer), so it must be unique per account and region."
  type        = string
  default     = "loam"

  validation {
    # 24 characters keep "<name>-lognode" within the 32-character load balancer and target
    # group limits.
    condition     = can(regex("^[a-z][a-z0-9-]{0,22}[a-z0-9]$", var.name))
    error_message = "name must be 2-24 characters of lowercase letters, digits and hyphens, start with a letter and not end with a hyphen."
  }
}

variable "tags" {
  description = "Tags added to every resource the module creates."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.tags : length(k) >= 1 && length(k) <= 128 && length(v) <= 256])
    error_message = "tags keys must be 1-128 characters and values at most 256 characters."
  }
}

variable "vpc_id" {
  description = "ID of the VPC every Loam component runs in."
  type        = string

  validation {
    condition     = can(regex("^vpc-[0-9a-f]+$", var.vpc_id))
    error_message = "vpc_id must look like vpc-0123456789abcdef0."
  }
}

variable "subnet_ids" {
  description = "Private subnets, one per availability zone, keyed by the zone's name (for example { \"eu-west-1a\" = \"subnet-...\" }). Log nodes run in every zone and learn their zone (LOAM_ZONE) from this key; sequencer voters take the first sequencer_voters zones in sorted order. The subnets need a route to S3, DynamoDB, ECR and CloudWatch Logs."
  type        = map(string)

  validation {
    condition     = length(var.subnet_ids) >= 1 && alltrue([for id in values(var.subnet_ids) : can(regex("^subnet-[0-9a-f]+$", id))])
    error_message = "subnet_ids needs at least one entry and every value must look like subnet-0123456789abcdef0."
  }

  validation {
    condition     = alltrue([for zone in keys(var.subnet_ids) : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$", zone))])
    error_message = "subnet_ids must be keyed by availability zone name (like us-east-1a), not by zone ID or index."
  }

  validation {
    condition     = length(distinct(values(var.subnet_ids))) == length(var.subnet_ids)
    error_message = "subnet_ids must name a different subnet for every zone."
  }
}

variable "client_cidr_blocks" {
  description = "IPv4 CIDR blocks allowed to reach the log nodes' HTTP API (8080), both through the load balancer and directly (zone-aware clients connect to a node in their own zone). Empty means the VPC's CIDR block."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for cidr in var.client_cidr_blocks : can(cidrhost(cidr, 0)) && !can(regex(":", cidr))])
    error_message = "client_cidr_blocks must hold IPv4 CIDR blocks such as 10.0.0.0/16."
  }
}

variable "client_security_group_ids" {
  description = "Security groups whose members may reach the log nodes' HTTP API (8080), in addition to client_cidr_blocks."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for id in var.client_security_group_ids : can(regex("^sg-[0-9a-f]+$", id))])
    error_message = "client_security_group_ids must hold security group IDs such as sg-0123456789abcdef0."
  }
}

variable "architecture" {
  description = "CPU architecture of the images and of every machine that runs them: arm64 (Graviton) or x86_64. Build the images for the same platform (linux/arm64 or linux/amd64)."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be arm64 or x86_64."
  }
}

# ---------------------------------------------------------------------------------------------
# Data bucket, coordination table, notification queue
# ---------------------------------------------------------------------------------------------

variable "bucket_name" {
  description = "Name of the data bucket (WAL objects, segments, namespace keys). Null lets AWS pick a unique name starting with \"<name>-data-\"."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be a valid S3 bucket name: 3-63 lowercase letters, digits, dots and hyphens."
  }
}

variable "bucket_force_destroy" {
  description = "Let terraform destroy delete the data bucket even when it holds objects. Keep false outside throwaway environments: the bucket holds every acknowledged record."
  type        = bool
  default     = false
}

variable "bucket_sse_algorithm" {
  description = "Default encryption of the data bucket: aws:kms (SSE-KMS with the deployment's key: kms_key_arn, else the key the module creates, else the AWS-managed aws/s3 key) or AES256 (SSE-S3)."
  type        = string
  default     = "aws:kms"

  validation {
    condition     = contains(["AES256", "aws:kms"], var.bucket_sse_algorithm)
    error_message = "bucket_sse_algorithm must be AES256 or aws:kms."
  }
}

variable "kms_key_arn" {
  description = "Customer-managed KMS key for the data bucket (when bucket_sse_algorithm is aws:kms) and the coordination table. Null uses AWS-managed keys. The log nodes' role is granted kms:Decrypt and kms:GenerateDataKey on it."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)."
  }

  validation {
    condition     = var.kms_key_arn == null || var.bucket_sse_algorithm == "aws:kms"
    error_message = "kms_key_arn is set but bucket_sse_algorithm is AES256: set bucket_sse_algorithm = \"aws:kms\" to use the key for the bucket."
  }
}

variable "create_kms_key" {
  description = "Create a customer-managed KMS key (rotated yearly) for the data bucket and the coordination table when kms_key_arn is null. False with no kms_key_arn uses AWS-managed keys. Set false with a kms_key_arn created in the same apply: its ARN is unknown at plan time, so Terraform could not tell otherwise whether the module creates a key."
  type        = bool
  default     = true
}

variable "kms_deletion_window_days" {
  description = "Waiting period before a destroyed KMS key the module created is deleted (7-30 days). Data encrypted under it is unreadable once it is gone."
  type        = number
  default     = 30

  validation {
    condition     = var.kms_deletion_window_days >= 7 && var.kms_deletion_window_days <= 30
    error_message = "kms_deletion_window_days must be between 7 and 30."
  }
}

variable "abort_incomplete_multipart_upload_days" {
  description = "Days after which the bucket lifecycle aborts an incomplete multipart upload (a log node or function that died mid-upload)."
  type        = number
  default     = 1

  validation {
    condition     = var.abort_incomplete_multipart_upload_days >= 1 && floor(var.abort_incomplete_multipart_upload_days) == var.abort_incomplete_multipart_upload_days
    error_message = "abort_incomplete_multipart_upload_days must be a whole number of days, at least 1."
  }
}

variable "queue_visibility_timeout_seconds" {
  description = "Visibility timeout of the WAL-created notification queue. Lambda needs it at least as long as the consuming function's timeout; AWS recommends six times it."
  type        = number
  default     = 900

  validation {
    condition     = var.queue_visibility_timeout_seconds >= 0 && var.queue_visibility_timeout_seconds <= 43200
    error_message = "queue_visibility_timeout_seconds must be between 0 and 43200 (12 hours)."
  }
}

variable "queue_message_retention_seconds" {
  description = "How long the WAL-created notification queue keeps an unhandled notification. The dead-letter queue always keeps 14 days."
  type        = number
  default     = 345600

  validation {
    condition     = var.queue_message_retention_seconds >= 60 && var.queue_message_retention_seconds <= 1209600
    error_message = "queue_message_retention_seconds must be between 60 (1 minute) and 1209600 (14 days)."
  }
}

variable "queue_max_receive_count" {
  description = "Receives of one notification before it moves to the dead-letter queue."
  type        = number
  default     = 5

  validation {
    condition     = var.queue_max_receive_count >= 1 && var.queue_max_receive_count <= 1000
    error_message = "queue_max_receive_count must be between 1 and 1000."
  }
}

variable "table_deletion_protection" {
  description = "Deletion protection of the DynamoDB coordination table. Its facts can be rebuilt from the sequencer and the bucket, but a rebuild takes a sweep."
  type        = bool
  default     = true
}

variable "log_retention_days" {
  description = "Retention of the CloudWatch log groups of the sequencer and the log nodes."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be a retention CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653)."
  }
}

# ---------------------------------------------------------------------------------------------
# Sequencer (Raft metastore on EC2, one voter per zone, each with its own EBS volume)
# ---------------------------------------------------------------------------------------------

variable "sequencer_image" {
  description = "Container image of sequencer-svc (built from infra/sequencer.Dockerfile), for example 123456789012.dkr.ecr.eu-west-1.amazonaws.com/loam/sequencer:v0.1.0. An ECR image gets pull rights on its repository only."
  type        = string

  validation {
    condition     = length(trimspace(var.sequencer_image)) > 0 && !can(regex("\\s", var.sequencer_image))
    error_message = "sequencer_image must be a non-empty image reference without spaces."
  }
}

variable "sequencer_voters" {
  description = "Raft voters of the sequencer, each in its own zone with its own EBS volume. Production runs 3 (survives one zone); 1 is for trials; 5 survives two failures."
  type        = number
  default     = 3

  validation {
    condition     = contains([1, 3, 5], var.sequencer_voters)
    error_message = "sequencer_voters must be 1, 3 or 5: an even count adds no fault tolerance to Raft."
  }

  validation {
    condition     = var.sequencer_voters <= length(var.subnet_ids)
    error_message = "sequencer_voters exceeds the zones in subnet_ids: every voter needs a zone of its own."
  }
}

variable "sequencer_private_ips" {
  description = "Fixed private IPv4 addresses of the voters, in voter order (the first sorted zones of subnet_ids). Empty lets AWS pick them once; either way each voter keeps its address on a network interface that outlives instance replacement."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.sequencer_private_ips) == 0 || length(var.sequencer_private_ips) == var.sequencer_voters
    error_message = "sequencer_private_ips must be empty or hold exactly sequencer_voters addresses."
  }

  validation {
    condition     = alltrue([for ip in var.sequencer_private_ips : can(regex("^([0-9]{1,3}\\.){3}[0-9]{1,3}$", ip))])
    error_message = "sequencer_private_ips must hold IPv4 addresses."
  }
}

variable "sequencer_instance_type" {
  description = "EC2 instance type of each voter. Must support var.architecture (the default m7g.large is arm64)."
  type        = string
  default     = "m7g.large"

  validation {
    condition     = can(regex("^[a-z0-9-]+\\.[a-z0-9]+$", var.sequencer_instance_type))
    error_message = "sequencer_instance_type must look like m7g.large."
  }
}

variable "sequencer_ami_id" {
  description = "AMI of the voters. Null uses the latest Amazon Linux 2023 for var.architecture (read once; later AMI releases do not replace running voters). A custom AMI needs dnf, docker, xfsprogs and the AWS CLI."
  type        = string
  default     = null

  validation {
    condition     = var.sequencer_ami_id == null || can(regex("^ami-[0-9a-f]+$", var.sequencer_ami_id))
    error_message = "sequencer_ami_id must look like ami-0123456789abcdef0."
  }
}

variable "sequencer_volume_size_gib" {
  description = "Size of each voter's data volume (gp3, encrypted): the Raft log and the state machine's bbolt file."
  type        = number
  default     = 50

  validation {
    condition     = var.sequencer_volume_size_gib >= 8 && var.sequencer_volume_size_gib <= 16384
    error_message = "sequencer_volume_size_gib must be between 8 and 16384."
  }
}

variable "sequencer_enable_ssm" {
  description = "Attach AmazonSSMManagedInstanceCore to the voters' role, so operators reach them with Session Manager instead of SSH (no SSH port is opened)."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------------------------------------
# Log nodes (ECS on Fargate, one service per zone, behind an internal NLB)
# ---------------------------------------------------------------------------------------------

variable "lognode_image" {
  description = "Container image of lognode-svc (built from infra/lognode.Dockerfile). An ECR image gets pull rights on its repository only."
  type        = string

  validation {
    condition     = length(trimspace(var.lognode_image)) > 0 && !can(regex("\\s", var.lognode_image))
    error_message = "lognode_image must be a non-empty image reference without spaces."
  }
}

variable "lognode_count_per_zone" {
  description = "Log node tasks per availability zone (the module runs one ECS service per zone so each task knows its zone)."
  type        = number
  default     = 1

  validation {
    condition     = var.lognode_count_per_zone >= 1 && floor(var.lognode_count_per_zone) == var.lognode_count_per_zone
    error_message = "lognode_count_per_zone must be a whole number, at least 1: every zone needs a log node for zone-local produce and fetch."
  }
}

variable "lognode_cpu" {
  description = "Fargate CPU units of one log node task (1024 = 1 vCPU)."
  type        = number
  default     = 1024

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096, 8192, 16384], var.lognode_cpu)
    error_message = "lognode_cpu must be a Fargate CPU size: 256, 512, 1024, 2048, 4096, 8192 or 16384."
  }
}

variable "lognode_memory" {
  description = "Memory (MiB) of one log node task. Must be a size Fargate pairs with lognode_cpu."
  type        = number
  default     = 2048

  validation {
    condition     = var.lognode_memory >= 512 && var.lognode_memory <= 122880
    error_message = "lognode_memory must be between 512 and 122880 MiB."
  }
}

variable "lognode_log_level" {
  description = "Log level of the log nodes (LOAM_LOG_LEVEL)."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.lognode_log_level)
    error_message = "lognode_log_level must be debug, info, warn or error."
  }
}

variable "lognode_extra_environment" {
  description = "Extra environment variables of the log node container. The module's own LOAM_* wiring (zone, bucket, sequencer, HTTP address) wins over an entry of the same name."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.lognode_extra_environment) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k))])
    error_message = "lognode_extra_environment keys must be environment variable names (letters, digits, underscores; not starting with a digit)."
  }
}

variable "ecs_container_insights" {
  description = "Enable CloudWatch Container Insights on the ECS cluster (billed per metric)."
  type        = bool
  default     = false
}

# --- functions ---------------------------------------------------------------------------------

variable "functions_dir" {
  description = "Directory holding the functions' deployment packages, <function>-<arm64 or amd64>.zip, as functions/build.sh writes them (dist/functions in the repository)."
  type        = string

  validation {
    condition     = length(trimspace(var.functions_dir)) > 0
    error_message = "functions_dir must name the directory functions/build.sh wrote the zips to."
  }
}

variable "functions_log_level" {
  description = "Log level of the four functions: debug, info, warn or error."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.functions_log_level)
    error_message = "functions_log_level must be debug, info, warn or error."
  }
}

variable "segment_target_bytes" {
  description = "Segment size the segmenter and compaction aim at, with a unit (64MiB-256MiB; LOAM_SEGMENT_TARGET_BYTES)."
  type        = string
  default     = "128MiB"

  validation {
    condition     = can(regex("^[0-9]+(B|KiB|MiB|GiB)$", var.segment_target_bytes))
    error_message = "segment_target_bytes must be a size such as 128MiB."
  }
}

variable "segment_max_age" {
  description = "Unsegmented data older than this is segmented whatever its size (a Go duration, LOAM_SEGMENT_MAX_AGE)."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^([0-9]+(ms|s|m|h))+$", var.segment_max_age))
    error_message = "segment_max_age must be a Go duration such as 10m."
  }
}

variable "tombstone_retention" {
  description = "How long compaction keeps a key's tombstone (a Go duration, LOAM_TOMBSTONE_RETENTION)."
  type        = string
  default     = "24h"

  validation {
    condition     = can(regex("^([0-9]+(ms|s|m|h))+$", var.tombstone_retention))
    error_message = "tombstone_retention must be a Go duration such as 24h."
  }
}

variable "gc_grace" {
  description = "How long retired objects stay readable before gc deletes them (a Go duration, LOAM_GC_GRACE): longer than the slowest reader's fetch."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^([0-9]+(ms|s|m|h))+$", var.gc_grace))
    error_message = "gc_grace must be a Go duration such as 10m."
  }
}

variable "segmenter_batch_size" {
  description = "Notifications per segmenter invocation from the queue (1-10000; above 10 needs a batching window)."
  type        = number
  default     = 10

  validation {
    condition     = var.segmenter_batch_size >= 1 && var.segmenter_batch_size <= 10000
    error_message = "segmenter_batch_size must be between 1 and 10000."
  }
}

variable "segmenter_batching_window_seconds" {
  description = "How long Lambda gathers notifications before invoking the segmenter (0-300 s)."
  type        = number
  default     = 1

  validation {
    condition     = var.segmenter_batching_window_seconds >= 0 && var.segmenter_batching_window_seconds <= 300
    error_message = "segmenter_batching_window_seconds must be between 0 and 300."
  }

  validation {
    condition     = var.segmenter_batch_size <= 10 || var.segmenter_batching_window_seconds >= 1
    error_message = "a segmenter_batch_size above 10 needs segmenter_batching_window_seconds of at least 1."
  }
}

variable "segmenter_max_concurrency" {
  description = "Most concurrent segmenter invocations the queue drives (2-1000); runs of one partition serialise on its lease anyway."
  type        = number
  default     = 10

  validation {
    condition     = var.segmenter_max_concurrency >= 2 && var.segmenter_max_concurrency <= 1000
    error_message = "segmenter_max_concurrency must be between 2 and 1000."
  }
}

variable "sweep_schedules" {
  description = "EventBridge Scheduler expression of each function's sweep, keyed by function (segmenter, retention, compaction, gc). Leave a function out to fire it only by hand."
  type        = map(string)
  default = {
    segmenter  = "rate(5 minutes)"
    retention  = "rate(5 minutes)"
    compaction = "rate(15 minutes)"
    gc         = "rate(5 minutes)"
  }

  validation {
    condition     = alltrue([for k in keys(var.sweep_schedules) : contains(["segmenter", "retention", "compaction", "gc"], k)])
    error_message = "sweep_schedules keys must be segmenter, retention, compaction or gc."
  }

  validation {
    condition     = alltrue([for v in values(var.sweep_schedules) : can(regex("^(rate|cron)\\(.+\\)$", v))])
    error_message = "each sweep schedule must be a rate(...) or cron(...) expression."
  }
}

# --- load balancer -----------------------------------------------------------------------------

variable "lb_certificate_arn" {
  description = "ACM certificate for TLS listeners on the load balancer (every log-node port). Null: TCP listeners that pass the nodes' own TLS or plaintext through."
  type        = string
  default     = null

  validation {
    condition     = var.lb_certificate_arn == null || can(regex("^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/.+$", var.lb_certificate_arn))
    error_message = "lb_certificate_arn must be an ACM certificate ARN."
  }
}

variable "lb_ssl_policy" {
  description = "Security policy of the TLS listeners (with lb_certificate_arn)."
  type        = string
  default     = "ELBSecurityPolicy-TLS13-1-2-2021-06"

  validation {
    condition     = can(regex("^ELBSecurityPolicy-", var.lb_ssl_policy))
    error_message = "lb_ssl_policy must be an ELB security policy name (ELBSecurityPolicy-...)."
  }
}

# --- log node autoscaling ----------------------------------------------------------------------

variable "lognode_min_per_zone" {
  description = "Fewest log node tasks per zone autoscaling keeps (at least 1: a zone without a node sends its clients across zones)."
  type        = number
  default     = 1

  validation {
    condition     = var.lognode_min_per_zone >= 1 && floor(var.lognode_min_per_zone) == var.lognode_min_per_zone
    error_message = "lognode_min_per_zone must be a whole number of at least 1."
  }
}

variable "lognode_max_per_zone" {
  description = "Most log node tasks per zone autoscaling may run."
  type        = number
  default     = 10

  validation {
    condition     = var.lognode_max_per_zone >= var.lognode_min_per_zone && var.lognode_max_per_zone >= var.lognode_count_per_zone && floor(var.lognode_max_per_zone) == var.lognode_max_per_zone
    error_message = "lognode_max_per_zone must be a whole number no smaller than lognode_min_per_zone and lognode_count_per_zone."
  }
}

variable "lognode_cpu_target_percent" {
  description = "Average CPU utilisation (percent) the CPU policy holds each zone's log nodes at."
  type        = number
  default     = 60

  validation {
    condition     = var.lognode_cpu_target_percent >= 10 && var.lognode_cpu_target_percent <= 90
    error_message = "lognode_cpu_target_percent must be between 10 and 90."
  }
}

variable "lognode_produce_bytes_target" {
  description = "Committed produce bytes per second per log node task the produce-bytes policy holds each zone at (default 32 MiB/s)."
  type        = number
  default     = 33554432

  validation {
    condition     = var.lognode_produce_bytes_target >= 1048576
    error_message = "lognode_produce_bytes_target must be at least 1 MiB/s (1048576)."
  }
}

# --- alarms ------------------------------------------------------------------------------------

variable "alarm_topic_arns" {
  description = "SNS topics the CloudWatch alarms notify (alarm and OK). Empty: the alarms only change state."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.alarm_topic_arns : can(regex("^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:.+$", a))])
    error_message = "alarm_topic_arns must be SNS topic ARNs."
  }
}

variable "alarm_commit_latency_ms" {
  description = "Mean CommitWal latency (milliseconds) over which the commit-latency alarm fires."
  type        = number
  default     = 100

  validation {
    condition     = var.alarm_commit_latency_ms > 0
    error_message = "alarm_commit_latency_ms must be positive."
  }
}

variable "sequencer_backup_interval" {
  description = "How often the sequencer's leader backs the state machine up to the data bucket (backups/sequencer/): the recovery point if every voter's volume is lost (sequencer-svc restore)."
  type        = string
  default     = "1h"

  validation {
    condition     = can(regex("^([0-9]+(m|h))+$", var.sequencer_backup_interval))
    error_message = "sequencer_backup_interval must be a Go duration in minutes or hours, such as 1h or 30m."
  }
}

# --- AWS emulators -------------------------------------------------------------------------------

variable "emulator_unsupported" {
  description = "Resources to leave out because the AWS emulator the module is applied to does not implement them (never on AWS): sqs_redrive_allow_policy (moto: the provider's waiter never sees it settle), aws_managed_policies (moto without MOTO_IAM_LOAD_MANAGED_POLICIES=true: the SSM policy attachment), application_autoscaling (moto: ListTagsForResource is not implemented, so the provider never finishes creating a scalable target), cloudwatch_alarms (moto answers 404 to the CloudWatch protocol the provider speaks), express_directory_buckets (moto has no S3 directory buckets)."
  type        = set(string)
  default     = []

  validation {
    condition     = alltrue([for r in var.emulator_unsupported : contains(["sqs_redrive_allow_policy", "aws_managed_policies", "application_autoscaling", "cloudwatch_alarms", "express_directory_buckets"], r)])
    error_message = "emulator_unsupported may name sqs_redrive_allow_policy, aws_managed_policies, application_autoscaling, cloudwatch_alarms and express_directory_buckets."
  }
}

# --- Express class -------------------------------------------------------------------------------

variable "express_zones" {
  description = "Three availability zones (keys of subnet_ids) for the express class's S3 Express One Zone directory buckets (express.tf, docs/express.md); empty: no express class (streams of class express are refused)."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.express_zones) == 0 || (length(distinct(var.express_zones)) == 3 && length(var.express_zones) == 3)
    error_message = "express_zones must name three different availability zones, or none."
  }
}

# --- Kafka ---------------------------------------------------------------------------------------

variable "kafka_advertised_listener" {
  description = "host:port Kafka Metadata names as the only broker (a load balancer in front of every log node); null: this module's load balancer on 9092; \"\": none (Metadata names the log nodes' own addresses, for clients inside the VPC)."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_advertised_listener == null || can(regex("^([^:/ ]+:[0-9]{1,5})?$", var.kafka_advertised_listener))
    error_message = "kafka_advertised_listener must be host:port, or \"\" for none."
  }
}

# --- cluster identity ----------------------------------------------------------------------------

variable "cluster_identity" {
  description = "The cluster identity: secret_arn, a Secrets Manager secret holding JSON {\"ca\", \"cert\", \"key\"} (PEM): the cluster CA and a certificate it issued for server and client auth whose names cover server_name (or every voter's address); server_name, the name callers check instead of the voter's address (LOAM_CLUSTER_SERVER_NAME). Set: the sequencer requires mutual TLS and log nodes, voters and functions present the identity (docs/tls.md). Null: plaintext inside the VPC. An object so that a secret created in the same apply (its ARN unknown at plan time) still lets Terraform count what the identity adds."
  type = object({
    secret_arn  = string
    server_name = optional(string)
  })
  default = null

  validation {
    condition     = var.cluster_identity == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+$", var.cluster_identity.secret_arn))
    error_message = "cluster_identity.secret_arn must be a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-xxxxxx)."
  }

  validation {
    condition     = var.cluster_identity == null || try(var.cluster_identity.server_name, null) == null || can(regex("^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$", var.cluster_identity.server_name))
    error_message = "cluster_identity.server_name must be a DNS name such as sequencer.loam."
  }
}

variable "identity_init_image" {
  description = "Image of the log node task's init container that writes the cluster identity to a task volume (with cluster_identity); it needs /bin/sh, printf, chown and chmod."
  type        = string
  default     = "public.ecr.aws/docker/library/busybox:1.37"

  validation {
    condition     = length(trimspace(var.identity_init_image)) > 0 && !can(regex("\\s", var.identity_init_image))
    error_message = "identity_init_image must be a non-empty image reference without spaces."
  }
}

# --- VPC endpoints -------------------------------------------------------------------------------

variable "vpc_gateway_endpoints" {
  description = "Create S3 and DynamoDB gateway endpoints (free) on the subnets' route tables, so object and coordination traffic stays off the NAT gateway. False when the VPC already has them."
  type        = bool
  default     = true
}

variable "vpc_endpoint_route_table_ids" {
  description = "Route tables the gateway endpoints are added to. Empty: every route table of vpc_id, read at plan time (pass them explicitly when they are created in the same apply)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for id in var.vpc_endpoint_route_table_ids : can(regex("^rtb-[0-9a-f]+$", id))])
    error_message = "vpc_endpoint_route_table_ids must hold route table IDs such as rtb-0123456789abcdef0."
  }
}

variable "vpc_interface_endpoints" {
  description = "Interface endpoints to create in the subnets (billed per zone and hour), for subnets without a route to the internet: any of sqs, logs, monitoring, ecr.api, ecr.dkr, secretsmanager, kms, sts, ssm, ssmmessages, ec2messages. Private subnets behind a NAT gateway need none."
  type        = set(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.vpc_interface_endpoints : contains(["sqs", "logs", "monitoring", "ecr.api", "ecr.dkr", "secretsmanager", "kms", "sts", "ssm", "ssmmessages", "ec2messages"], s)])
    error_message = "vpc_interface_endpoints may hold sqs, logs, monitoring, ecr.api, ecr.dkr, secretsmanager, kms, sts, ssm, ssmmessages and ec2messages."
  }
}

variable "namespace_keys_enabled" {
  description = "Namespaces may have customer-managed keys (docs/encryption.md): the segmenter and compaction run with LOAM_KMS=aws and may use namespace keys (kms:GenerateDataKey, kms:Decrypt under a loam:namespace encryption context), so keyed namespaces' data is segmented sealed. Run the log nodes with LOAM_KMS=aws too (lognode_extra_environment)."
  type        = bool
  default     = false
}

variable "namespace_segment_sse_kms" {
  description = "With namespace_keys_enabled, each sealed segment of a keyed namespace is also stored with SSE-KMS under the namespace's key (LOAM_SEGMENT_SSE_KMS); the functions and log nodes may then use the keys through S3 (kms:ViaService)."
  type        = bool
  default     = true
}

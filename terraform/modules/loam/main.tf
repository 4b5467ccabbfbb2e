# Loam on AWS: the data bucket and its WAL-created notification queue, the DynamoDB
# coordination table, the sequencer (a Raft group of EC2 voters, one per zone, each with its own
# EBS volume and a stable private address) and the log nodes (ECS Fargate, one service per zone,
# behind an internal network load balancer), the four functions on Lambda (functions.tf), VPC
# endpoints (endpoints.tf) and the cluster identity from Secrets Manager (identity.tf).

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

data "aws_region" "current" {}

data "aws_vpc" "this" {
  id = var.vpc_id
}

# The zone each subnet really lies in: checked against the keys of var.subnet_ids, because those
# keys become LOAM_ZONE and the voters' volume zones.
data "aws_subnet" "this" {
  for_each = var.subnet_ids
  id       = each.value
}

locals {
  # Ports fixed by the architecture (docs: "Default ports").
  http_port      = 8080
  grpc_port      = 9090
  kafka_port     = 9092
  otlp_grpc_port = 4317
  otlp_http_port = 4318
  rpc_port       = 7070
  raft_port      = 7071

  # Every port a log node serves, by name: the container's port mappings, the load balancer's
  # listeners and target groups, and the security group rules follow this map.
  # Names stay within 5 characters: "<name>-<port name>" is a target group name (32 at most).
  lognode_ports = {
    http  = local.http_port
    grpc  = local.grpc_port
    kafka = local.kafka_port
    otlpg = local.otlp_grpc_port
    otlph = local.otlp_http_port
  }

  # CloudWatch namespace of the log nodes' embedded metrics (lognode-svc --emf-namespace).
  metric_namespace = "Loam"

  # uid:gid of the distroless "nonroot" user both images run as.
  container_uid = 65532

  region     = data.aws_region.current.region
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition

  tags = merge(var.tags, { "loam:deployment" = var.name })

  zones = sort(keys(var.subnet_ids))

  # Voter i runs in the i-th sorted zone. Keys (seq-1, seq-2, ...) are the Raft server IDs and
  # never change for a voter, so its volume, address and identity stay together.
  sequencer_voters = {
    for i, zone in slice(local.zones, 0, var.sequencer_voters) : "seq-${i + 1}" => {
      index     = i
      zone      = zone
      subnet_id = var.subnet_ids[zone]
    }
  }

  sequencer_ips            = [for id, voter in local.sequencer_voters : aws_network_interface.sequencer[id].private_ip]
  sequencer_rpc_addresses  = [for ip in local.sequencer_ips : "${ip}:${local.rpc_port}"]
  sequencer_raft_addresses = [for ip in local.sequencer_ips : "${ip}:${local.raft_port}"]
  # sequencer-svc bootstraps a new group on one voter only (seq-1, with --bootstrap and the
  # other voters as --peers); the others start empty and join when seq-1 contacts them.
  sequencer_bootstrap_peers = join(",", [
    for id, voter in local.sequencer_voters : "${id}=${aws_network_interface.sequencer[id].private_ip}:${local.raft_port}"
    if voter.index != 0
  ])
  sequencer_ami_id           = var.sequencer_ami_id != null ? var.sequencer_ami_id : data.aws_ssm_parameter.al2023[0].insecure_value
  bucket_url                 = "s3://${aws_s3_bucket.data.bucket}?region=${local.region}"
  ecs_cpu_architecture       = var.architecture == "arm64" ? "ARM64" : "X86_64"
  lognode_healthcheck_url    = "http://127.0.0.1:${local.http_port}/healthz"
  lognode_healthcheck_binary = "/usr/local/bin/loam-healthcheck"

  # ECR images get pull rights on their own repository only; other registries need none.
  ecr_image_pattern = "^([0-9]{12})\\.dkr\\.ecr\\.([a-z0-9-]+)\\.amazonaws\\.com(\\.cn)?/([^:@]+)"
  images = {
    sequencer = var.sequencer_image
    lognode   = var.lognode_image
  }
  ecr_images = {
    for component, image in local.images : component => regex(local.ecr_image_pattern, image)
    if can(regex(local.ecr_image_pattern, image))
  }
  ecr_repository_arns = {
    for component, m in local.ecr_images : component => "arn:${local.partition}:ecr:${m[1]}:${m[0]}:repository/${m[3]}"
  }
  ecr_registries = {
    for component, image in local.images : component => split("/", image)[0]
    if contains(keys(local.ecr_images), component)
  }

  # Environment of the log node in each zone. The module's wiring is merged last so that
  # lognode_extra_environment cannot override it. LOAM_NODE_ID is left to its default, the
  # task's hostname, which Fargate makes unique per task.
  lognode_environment = {
    for zone in local.zones : zone => merge(var.lognode_extra_environment, local.express_lognode_environment, local.lognode_identity_environment, local.peer_lognode_environment, {
      LOAM_ZONE       = zone
      LOAM_HTTP_ADDR  = "0.0.0.0:${local.http_port}"
      LOAM_GRPC_ADDR  = "0.0.0.0:${local.grpc_port}"
      LOAM_KAFKA_ADDR = "0.0.0.0:${local.kafka_port}"
      # Kafka Metadata names the load balancer (clients outside the VPC cannot reach tasks).
      LOAM_KAFKA_ADVERTISED_LISTENER = local.kafka_advertised_listener
      LOAM_OTLP_GRPC_ADDR            = "0.0.0.0:${local.otlp_grpc_port}"
      LOAM_OTLP_HTTP_ADDR            = "0.0.0.0:${local.otlp_http_port}"
      LOAM_BUCKET                    = local.bucket_url
      LOAM_SEQUENCER                 = join(",", local.sequencer_rpc_addresses)
      LOAM_COORD_TABLE               = aws_dynamodb_table.coord.name
      LOAM_LOG_LEVEL                 = var.lognode_log_level
      AWS_REGION                     = local.region
      # Embedded-metric-format lines on stdout: CloudWatch extracts ProduceBytesPerSecond,
      # which the produce-bytes autoscaling policy tracks.
      LOAM_EMF_INTERVAL   = "60s"
      LOAM_EMF_NAMESPACE  = local.metric_namespace
      LOAM_EMF_DEPLOYMENT = var.name
    })
  }
}

data "aws_ssm_parameter" "al2023" {
  count = var.sequencer_ami_id == null ? 1 : 0
  name  = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${var.architecture}"
}

data "aws_ec2_instance_type" "sequencer" {
  instance_type = var.sequencer_instance_type
}

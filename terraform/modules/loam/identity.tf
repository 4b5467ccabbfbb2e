# The cluster identity: the cluster CA and a certificate it issued (valid for server and client
# authentication), kept in one Secrets Manager secret as JSON {"ca": PEM, "cert": PEM,
# "key": PEM}. With cluster_identity set, the sequencer requires it (mutual TLS on
# RPC and Raft) and every caller presents it:
#   - log node tasks: the task definition's `secrets` hand the three PEMs to a short-lived
#     init container, which writes them (mode 0400, owned by the image's user) to a task
#     volume the log node reads (LOAM_CLUSTER_CA, LOAM_CLUSTER_CERT, LOAM_CLUSTER_KEY);
#   - sequencer voters: the systemd unit fetches the secret before every start into the
#     voter's data volume (/var/lib/loam/identity), so a restart picks up a rotated secret;
#   - functions: LOAM_CLUSTER_IDENTITY_SECRET names the secret, which each function reads at
#     cold start (Lambda has no secrets injection).
# Each role may read this secret only. A secret encrypted with a customer-managed key needs
# kms:Decrypt for the three roles in that key's policy.

locals {
  # Known at plan time even when the secret is created in the same apply.
  identity_enabled    = var.cluster_identity != null
  identity_secret_arn = local.identity_enabled ? var.cluster_identity.secret_arn : null
  identity_server     = local.identity_enabled ? try(var.cluster_identity.server_name, null) : null

  # Where the log node's init container writes the PEMs (a task volume, not the image).
  identity_dir = "/identity"
  identity_files = {
    LOAM_CLUSTER_CA   = "${local.identity_dir}/ca.pem"
    LOAM_CLUSTER_CERT = "${local.identity_dir}/cert.pem"
    LOAM_CLUSTER_KEY  = "${local.identity_dir}/key.pem"
  }
  # ECS reads one JSON key of the secret per variable: ARN:json-key:version-stage:version-id.
  identity_secrets = local.identity_enabled ? [
    for name, key in { IDENTITY_CA = "ca", IDENTITY_CERT = "cert", IDENTITY_KEY = "key" } : {
      name                         = name
      valueFrom                    = "${local.identity_secret_arn}:${key}::"
    }
  ] : []

  identity_server_name = local.identity_server == null ? {} : { LOAM_CLUSTER_SERVER_NAME = local.identity_server }

  # What the log node and the functions get on top of their wiring.
  lognode_identity_environment  = local.identity_enabled ? merge(local.identity_files, local.identity_server_name) : {}
  function_identity_environment = local.identity_enabled ? merge({ LOAM_CLUSTER_IDENTITY_SECRET = local.identity_secret_arn }, local.identity_server_name) : {}

  # The init container: writes the three PEMs and exits; the log node starts after it
  # succeeded. It runs as root to own the fresh volume, then hands the files to the image's
  # user.
  identity_init_container = {
    name        = "identity"
    image       = var.identity_init_image
    essential   = false
    user        = "0"
    secrets     = local.identity_secrets
    entryPoint  = ["/bin/sh", "-c"]
    command     = ["set -eu; umask 077; printf '%s\\n' \"$IDENTITY_CA\" >${local.identity_files.LOAM_CLUSTER_CA}; printf '%s\\n' \"$IDENTITY_CERT\" >${local.identity_files.LOAM_CLUSTER_CERT}; printf '%s\\n' \"$IDENTITY_KEY\" >${local.identity_files.LOAM_CLUSTER_KEY}; chown ${local.container_uid}:${local.container_uid} ${local.identity_dir}/*.pem; chmod 0400 ${local.identity_dir}/*.pem"]
    mountPoints = [{ sourceVolume = "identity", containerPath = local.identity_dir, readOnly = false }]
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.lognode.name
        awslogs-region        = local.region
        awslogs-stream-prefix = "identity"
      }
    }
  }
}

data "aws_iam_policy_document" "identity" {
  count = local.identity_enabled ? 1 : 0

  statement {
    sid       = "ClusterIdentity"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [local.identity_secret_arn]
  }
}

# ECS's agent reads the secret for the task definition's `secrets` (the execution role, not
# the task role: lognode-svc itself never reads it).
resource "aws_iam_role_policy" "lognode_execution_identity" {
  count = local.identity_enabled ? 1 : 0

  name   = "loam-cluster-identity"
  role   = aws_iam_role.lognode_execution.id
  policy = data.aws_iam_policy_document.identity[0].json
}

resource "aws_iam_role_policy" "sequencer_identity" {
  count = local.identity_enabled ? 1 : 0

  name   = "loam-cluster-identity"
  role   = aws_iam_role.sequencer.id
  policy = data.aws_iam_policy_document.identity[0].json
}

resource "aws_iam_role_policy" "function_identity" {
  for_each = local.identity_enabled ? local.functions : {}

  name   = "loam-cluster-identity"
  role   = aws_iam_role.function[each.key].id
  policy = data.aws_iam_policy_document.identity[0].json
}

# Security groups. The sequencer's ports (RPC 7070, Raft 7071) open only to the cluster: Raft
# between voters, RPC from voters, log nodes and functions. The log nodes' HTTP port (8080)
# and every other port in local.lognode_ports open to the load balancer and to clients
# (zone-aware clients connect to a node directly).
# Egress is limited to the cluster's own ports and HTTPS to AWS APIs (S3, DynamoDB, ECR, logs).

resource "aws_security_group" "sequencer" {
  name        = "${var.name}-sequencer"
  description = "Loam sequencer voters: Raft and RPC from the cluster only"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-sequencer" })
}

resource "aws_security_group" "lognode" {
  name        = "${var.name}-lognode"
  description = "Loam log nodes: HTTP API from clients and the load balancer"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-lognode" })
}

resource "aws_security_group" "functions" {
  name        = "${var.name}-functions"
  description = "Loam functions (segmenter, retention, compaction, gc): sequencer RPC and AWS APIs"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-functions" })
}

resource "aws_security_group" "nlb" {
  name        = "${var.name}-nlb"
  description = "Loam internal load balancer in front of the log nodes"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-nlb" })
}

# --- sequencer ingress ---------------------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "sequencer_raft" {
  security_group_id            = aws_security_group.sequencer.id
  description                  = "Raft between sequencer voters"
  ip_protocol                  = "tcp"
  from_port                    = local.raft_port
  to_port                      = local.raft_port
  referenced_security_group_id = aws_security_group.sequencer.id
}

resource "aws_vpc_security_group_ingress_rule" "sequencer_rpc" {
  for_each = {
    sequencer = aws_security_group.sequencer.id
    lognode   = aws_security_group.lognode.id
    functions = aws_security_group.functions.id
  }

  security_group_id            = aws_security_group.sequencer.id
  description                  = "Sequencer RPC from ${each.key}"
  ip_protocol                  = "tcp"
  from_port                    = local.rpc_port
  to_port                      = local.rpc_port
  referenced_security_group_id = each.value
}

# --- log node and load balancer ingress --------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "lognode_from_nlb" {
  for_each = local.lognode_ports

  security_group_id            = aws_security_group.lognode.id
  description                  = "${each.key} (${each.value}) and health checks from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = aws_security_group.nlb.id
}

moved {
  from = aws_vpc_security_group_ingress_rule.lognode_http_from_nlb
  to   = aws_vpc_security_group_ingress_rule.lognode_from_nlb["http"]
}

resource "aws_vpc_security_group_ingress_rule" "lognode_from_cidr" {
  for_each = local.client_port_cidrs

  security_group_id = aws_security_group.lognode.id
  description       = "${each.value.port_name} (${each.value.port}) from clients in ${each.value.cidr}"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = each.value.cidr
}

resource "aws_vpc_security_group_ingress_rule" "lognode_from_sg" {
  for_each = local.client_port_sgs

  security_group_id            = aws_security_group.lognode.id
  description                  = "${each.value.port_name} (${each.value.port}) from client security group ${each.value.sg}"
  ip_protocol                  = "tcp"
  from_port                    = each.value.port
  to_port                      = each.value.port
  referenced_security_group_id = each.value.sg
}

resource "aws_vpc_security_group_ingress_rule" "nlb_from_cidr" {
  for_each = local.client_port_cidrs

  security_group_id = aws_security_group.nlb.id
  description       = "${each.value.port_name} (${each.value.port}) from clients in ${each.value.cidr}"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = each.value.cidr
}

resource "aws_vpc_security_group_ingress_rule" "nlb_from_sg" {
  for_each = local.client_port_sgs

  security_group_id            = aws_security_group.nlb.id
  description                  = "${each.value.port_name} (${each.value.port}) from client security group ${each.value.sg}"
  ip_protocol                  = "tcp"
  from_port                    = each.value.port
  to_port                      = each.value.port
  referenced_security_group_id = each.value.sg
}

locals {
  # Each client-facing port crossed with each client CIDR block and security group.
  # Keyed by names known at plan time: the default block is the VPC's, which may only be
  # known after apply (a VPC created in the same run).
  client_cidrs = length(var.client_cidr_blocks) > 0 ? { for c in var.client_cidr_blocks : c => c } : { vpc = data.aws_vpc.this.cidr_block }
  client_port_cidrs = {
    for pair in setproduct(keys(local.lognode_ports), keys(local.client_cidrs)) : "${pair[0]} ${pair[1]}" => {
      port_name = pair[0]
      port      = local.lognode_ports[pair[0]]
      cidr      = local.client_cidrs[pair[1]]
    }
  }
  client_port_sgs = {
    for pair in setproduct(keys(local.lognode_ports), var.client_security_group_ids) : "${pair[0]} ${pair[1]}" => {
      port_name = pair[0]
      port      = local.lognode_ports[pair[0]]
      sg        = pair[1]
    }
  }
}

# --- egress ------------------------------------------------------------------------------------

resource "aws_vpc_security_group_egress_rule" "nlb_to_lognode" {
  for_each = local.lognode_ports

  security_group_id            = aws_security_group.nlb.id
  description                  = "Forwarding ${each.key} (${each.value}) and health checks to the log nodes"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = aws_security_group.lognode.id
}

moved {
  from = aws_vpc_security_group_egress_rule.nlb_to_lognode
  to   = aws_vpc_security_group_egress_rule.nlb_to_lognode["http"]
}

resource "aws_vpc_security_group_egress_rule" "sequencer_raft" {
  security_group_id            = aws_security_group.sequencer.id
  description                  = "Raft to the other voters"
  ip_protocol                  = "tcp"
  from_port                    = local.raft_port
  to_port                      = local.raft_port
  referenced_security_group_id = aws_security_group.sequencer.id
}

resource "aws_vpc_security_group_egress_rule" "to_sequencer_rpc" {
  for_each = {
    sequencer = aws_security_group.sequencer.id
    lognode   = aws_security_group.lognode.id
    functions = aws_security_group.functions.id
  }

  security_group_id            = each.value
  description                  = "Sequencer RPC"
  ip_protocol                  = "tcp"
  from_port                    = local.rpc_port
  to_port                      = local.rpc_port
  referenced_security_group_id = aws_security_group.sequencer.id
}

resource "aws_vpc_security_group_egress_rule" "https" {
  for_each = {
    sequencer = aws_security_group.sequencer.id
    lognode   = aws_security_group.lognode.id
    functions = aws_security_group.functions.id
  }

  security_group_id = each.value
  description       = "HTTPS to AWS APIs (S3, DynamoDB, ECR, CloudWatch Logs, SSM, KMS)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

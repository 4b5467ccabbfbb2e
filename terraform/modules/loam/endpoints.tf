# VPC endpoints, so the subnets reach AWS APIs without a NAT gateway (or without paying NAT
# processing for the bulk of the traffic): gateway endpoints for S3 (every WAL object and
# segment) and DynamoDB (the coordination table), free of charge, on the route tables of the
# subnets; and interface endpoints for whatever else the components call when the subnets have
# no route to the internet: SQS (the segmenter's event source), CloudWatch Logs and metrics,
# ECR (image pulls), Secrets Manager (the cluster identity), KMS, STS and SSM (Session
# Manager). Interface endpoints are billed per zone and hour, so none is created by default.

locals {
  gateway_endpoints = var.vpc_gateway_endpoints ? toset(["s3", "dynamodb"]) : toset([])
  # Route tables of the gateway endpoints: the caller's, else every route table of the VPC.
  endpoint_route_table_ids = length(var.vpc_endpoint_route_table_ids) > 0 ? var.vpc_endpoint_route_table_ids : data.aws_route_tables.vpc[0].ids
}

data "aws_route_tables" "vpc" {
  count = var.vpc_gateway_endpoints && length(var.vpc_endpoint_route_table_ids) == 0 ? 1 : 0

  vpc_id = var.vpc_id
}

resource "aws_vpc_endpoint" "gateway" {
  for_each = local.gateway_endpoints

  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${local.region}.${each.key}"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = local.endpoint_route_table_ids
  tags              = merge(local.tags, { Name = "${var.name}-${each.key}" })
}

resource "aws_security_group" "endpoints" {
  count = length(var.vpc_interface_endpoints) > 0 ? 1 : 0

  name        = "${var.name}-endpoints"
  description = "Loam interface VPC endpoints: HTTPS from the cluster"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-endpoints" })
}

resource "aws_vpc_security_group_ingress_rule" "endpoints_https" {
  for_each = length(var.vpc_interface_endpoints) > 0 ? {
    sequencer = aws_security_group.sequencer.id
    lognode   = aws_security_group.lognode.id
    functions = aws_security_group.functions.id
  } : {}

  security_group_id            = aws_security_group.endpoints[0].id
  description                  = "HTTPS to AWS APIs from ${each.key}"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = each.value
}

resource "aws_vpc_endpoint" "interface" {
  for_each = var.vpc_interface_endpoints

  vpc_id              = var.vpc_id
  service_name        = "com.amazonaws.${local.region}.${each.key}"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = values(var.subnet_ids)
  security_group_ids  = [aws_security_group.endpoints[0].id]
  private_dns_enabled = true
  tags                = merge(local.tags, { Name = "${var.name}-${each.key}" })
}

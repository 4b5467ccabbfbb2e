# The smallest Loam deployment that stands on its own: only a region and a name. It creates its
# own VPC (three private subnets for the cluster, three public ones for the NAT gateway), then
# the whole system on it with the published images. One NAT gateway keeps the cost down; the
# module's S3 and DynamoDB gateway endpoints keep the data traffic off it.

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      project    = "loam"
      deployment = var.name
    }
  }
}

data "aws_availability_zones" "available" {
  state = "available"

  filter {
    name   = "opt-in-status"
    values = ["opt-in-not-required"]
  }
}

locals {
  zones = slice(sort(data.aws_availability_zones.available.names), 0, 3)
  # 10.42.0.0/16: private /20s from the bottom, public /24s from the top.
  private_cidrs = { for i, zone in local.zones : zone => cidrsubnet(var.vpc_cidr, 4, i) }
  public_cidrs  = { for i, zone in local.zones : zone => cidrsubnet(var.vpc_cidr, 8, 250 + i) }
}

resource "aws_vpc" "this" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true # interface endpoints' private DNS, the load balancer's name
  tags                 = { Name = var.name }
}

resource "aws_subnet" "private" {
  for_each = local.private_cidrs

  vpc_id            = aws_vpc.this.id
  availability_zone = each.key
  cidr_block        = each.value
  tags              = { Name = "${var.name}-private-${each.key}" }
}

resource "aws_subnet" "public" {
  for_each = local.public_cidrs

  vpc_id            = aws_vpc.this.id
  availability_zone = each.key
  cidr_block        = each.value
  tags              = { Name = "${var.name}-public-${each.key}" }
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
  tags   = { Name = var.name }
}

resource "aws_eip" "nat" {
  domain = "vpc"
  tags   = { Name = "${var.name}-nat" }
}

resource "aws_nat_gateway" "this" {
  allocation_id = aws_eip.nat.id
  subnet_id     = aws_subnet.public[local.zones[0]].id
  tags          = { Name = var.name }

  depends_on = [aws_internet_gateway.this]
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id
  tags   = { Name = "${var.name}-public" }

  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this.id
  }
}

resource "aws_route_table_association" "public" {
  for_each = aws_subnet.public

  subnet_id      = each.value.id
  route_table_id = aws_route_table.public.id
}

resource "aws_route_table" "private" {
  vpc_id = aws_vpc.this.id
  tags   = { Name = "${var.name}-private" }

  route {
    cidr_block     = "0.0.0.0/0"
    nat_gateway_id = aws_nat_gateway.this.id
  }
}

resource "aws_route_table_association" "private" {
  for_each = aws_subnet.private

  subnet_id      = each.value.id
  route_table_id = aws_route_table.private.id
}

module "loam" {
  source = "../../modules/loam"

  name       = var.name
  vpc_id     = aws_vpc.this.id
  subnet_ids = { for zone, s in aws_subnet.private : zone => s.id }
  # Created in this apply, so named here rather than looked up.
  vpc_endpoint_route_table_ids = [aws_route_table.private.id]

  sequencer_image = var.sequencer_image
  lognode_image   = var.lognode_image
  functions_dir   = var.functions_dir

  # A trial is meant to be torn down again; production keeps these at their defaults.
  bucket_force_destroy      = true
  table_deletion_protection = false

  # The subnets' routes to AWS APIs exist before anything starts.
  depends_on = [aws_route_table_association.private]
}

# Loam's Terraform module applied to LocalStack: a VPC with a subnet per zone (LocalStack's EC2
# is an emulation, nothing runs in it) and the module on it, with one sequencer voter at the
# fixed address the compose file gives the sequencer container. provider_override.tf points
# the provider at LocalStack; up.sh applies the parts LocalStack serves (see its TARGETS) and
# runs the sequencer and the log node as compose containers instead of EC2 and ECS.

provider "aws" {
  region = var.region
}

locals {
  subnets = {
    "${var.region}a" = "10.42.0.0/24"
    "${var.region}b" = "10.42.1.0/24"
    "${var.region}c" = "10.42.2.0/24"
  }
}

resource "aws_vpc" "this" {
  cidr_block = "10.42.0.0/16"
  tags       = { Name = var.name }
}

resource "aws_subnet" "this" {
  for_each = local.subnets

  vpc_id            = aws_vpc.this.id
  availability_zone = each.key
  cidr_block        = each.value
  tags              = { Name = "${var.name}-${each.key}" }
}

module "loam" {
  source = "../../terraform/modules/loam"

  name       = var.name
  vpc_id     = aws_vpc.this.id
  subnet_ids = { for zone, s in aws_subnet.this : zone => s.id }

  # compose.yaml runs these images, built from infra/*.Dockerfile.
  sequencer_image = "loam-sequencer:local"
  lognode_image   = "loam-lognode:local"
  architecture    = var.architecture
  functions_dir   = var.functions_dir

  # One voter, at the address compose.yaml gives the sequencer container on the network the
  # functions' containers join (LAMBDA_DOCKER_NETWORK): the functions dial the module's own
  # LOAM_SEQUENCER wiring and reach it.
  sequencer_voters      = 1
  sequencer_private_ips = [var.sequencer_ip]
  sequencer_ami_id      = "ami-00000000000000000"

  # compose.yaml's log node opens this bucket and table by name.
  bucket_name               = var.bucket_name
  bucket_force_destroy      = true
  table_deletion_protection = false
  # LocalStack has no Session Manager to attach to.
  sequencer_enable_ssm = false
}

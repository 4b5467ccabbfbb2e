# A complete Loam deployment into an existing VPC: three sequencer voters (one per zone), one
# log node per zone behind an internal load balancer, the data bucket, its notification queue
# and the coordination table. Copy terraform.tfvars.example to terraform.tfvars and fill it in.

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      project     = "loam"
      environment = "demo"
    }
  }
}

module "loam" {
  source = "../../modules/loam"

  name       = var.name
  vpc_id     = var.vpc_id
  subnet_ids = var.subnet_ids

  sequencer_image           = var.sequencer_image
  sequencer_voters          = 3
  sequencer_instance_type   = "m7g.large"
  sequencer_volume_size_gib = 50

  functions_dir = var.functions_dir

  lognode_image          = var.lognode_image
  lognode_count_per_zone = 1
  lognode_cpu            = 1024
  lognode_memory         = 2048

  architecture       = "arm64"
  log_retention_days = 14

  # A demo is meant to be torn down again; production keeps these at their defaults.
  bucket_force_destroy      = true
  table_deletion_protection = false

  tags = {
    owner = "platform-team"
  }
}

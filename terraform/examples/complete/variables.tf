variable "region" {
  description = "AWS region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Name of the deployment; prefixes every resource."
  type        = string
  default     = "loam-demo"
}

variable "vpc_id" {
  description = "Existing VPC to deploy into."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets keyed by availability zone name, one per zone (three for a three-voter sequencer)."
  type        = map(string)
}

variable "sequencer_image" {
  description = "sequencer-svc image pushed as infra/README.md shows."
  type        = string
}

variable "lognode_image" {
  description = "lognode-svc image pushed as infra/README.md shows."
  type        = string
}

variable "functions_dir" {
  description = "Where functions/build.sh wrote the functions' zips (run it from the repository root first)."
  type        = string
  default     = "../../../dist/functions"
}

variable "region" {
  description = "AWS region to deploy to (three availability zones or more)."
  type        = string
}

variable "name" {
  description = "Name of the deployment; prefixes every resource (2-24 lowercase letters, digits, hyphens)."
  type        = string
}

variable "vpc_cidr" {
  description = "CIDR block of the VPC the example creates (a /16: three private /20s and three public /24s)."
  type        = string
  default     = "10.42.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0)) && endswith(var.vpc_cidr, "/16")
    error_message = "vpc_cidr must be an IPv4 /16 such as 10.42.0.0/16."
  }
}

variable "sequencer_image" {
  description = "sequencer-svc image (linux/arm64: the module's default architecture)."
  type        = string
  default     = "ghcr.io/loamhq/sequencer:latest"
}

variable "lognode_image" {
  description = "lognode-svc image (linux/arm64)."
  type        = string
  default     = "ghcr.io/loamhq/lognode:latest"
}

variable "functions_dir" {
  description = "Where functions/build.sh wrote the functions' zips (run `bash functions/build.sh` from the repository root first)."
  type        = string
  default     = "../../../dist/functions"
}

variable "region" {
  description = "Region LocalStack emulates."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Deployment name (the table is <name>-coord, the queue <name>-wal-events)."
  type        = string
  default     = "loam-local"
}

variable "bucket_name" {
  description = "Data bucket; compose.yaml's log node opens it."
  type        = string
  default     = "loam-local-data"
}

variable "sequencer_ip" {
  description = "Address of the sequencer container on compose.yaml's network (in the first subnet)."
  type        = string
  default     = "10.42.0.10"
}

variable "architecture" {
  description = "The functions' architecture: the host's (up.sh passes arm64 or x86_64)."
  type        = string
  default     = "x86_64"
}

variable "functions_dir" {
  description = "Where functions/build.sh wrote the zips (up.sh builds them)."
  type        = string
}

terraform {
  # 1.9: variable validations may refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.10 added aws_instance.primary_network_interface (the sequencer's stable ENI).
      version = ">= 6.10, < 7.0"
    }
  }
}

# Points the hashicorp/aws provider at LocalStack's edge port, the way LocalStack documents it.
# Terraform merges a *_override.tf file into the root's provider block, so this file also turns
# any other root (terraform/examples/minimal, your own) towards LocalStack: copy it next to
# that root's .tf files. compose.yaml publishes LocalStack on 127.0.0.1:4566; edit the address
# for a LocalStack elsewhere.

provider "aws" {
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  s3_use_path_style           = true

  endpoints {
    applicationautoscaling = "http://localhost:4566"
    cloudwatch             = "http://localhost:4566"
    dynamodb               = "http://localhost:4566"
    ec2                    = "http://localhost:4566"
    ecs                    = "http://localhost:4566"
    elbv2                  = "http://localhost:4566"
    iam                    = "http://localhost:4566"
    kms                    = "http://localhost:4566"
    lambda                 = "http://localhost:4566"
    logs                   = "http://localhost:4566"
    s3                     = "http://localhost:4566"
    scheduler              = "http://localhost:4566"
    secretsmanager         = "http://localhost:4566"
    sqs                    = "http://localhost:4566"
    ssm                    = "http://localhost:4566"
    sts                    = "http://localhost:4566"
  }
}

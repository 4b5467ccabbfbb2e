// Package deploy tests the AWS deployment without AWS: the Terraform under terraform/ and the
// container images under infra/.
//
// # Basics
//
// Terraform providers cannot be downloaded here, so neither `terraform init` nor `validate` can
// run. The tests parse every .tf file with hashicorp/hcl/v2 instead and check the wiring that
// validate would check and more: every var./local./module./data./resource reference points at
// something declared, every variable and local is used, the example root passes every required
// module variable and only declared ones, templatefile arguments match the template's
// variables (and the rendered sequencer user data passes `bash -n`), and the system's
// invariants hold: the bucket's wal/ notifications reach the queue, the queue policy admits
// s3.amazonaws.com from the bucket only, the log node task gets LOAM_BUCKET, LOAM_SEQUENCER,
// LOAM_ZONE and LOAM_HTTP_ADDR, IAM never grants S3 or DynamoDB actions on "*", the sequencer's
// role has nothing on S3, and ports 7070/7071/8080 sit where the architecture puts them.
// `terraform fmt -check` runs when terraform is on PATH. The Dockerfiles are checked as text:
// which packages they build, what they expose, that they run as non-root.
//
// # Caveats
//
// These are static checks: they cannot tell whether an attribute exists in the AWS provider's
// schema, whether IAM actions suffice at run time, or whether the images build. Each checker
// has a self-test on a small broken configuration so that a checker that stops finding
// anything fails loudly.
package deploy

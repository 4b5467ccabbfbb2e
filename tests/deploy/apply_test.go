package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/loamhq/loam/tests/testserver"
)

// ProviderVersion is the hashicorp/aws provider the emulator apply test uses: a pseudo-version
// of its main branch that the Go module proxy serves (the registry cannot be reached here).
// Build and cache it once per machine (about 44 minutes on 2 cores; .ci/tools.sh does it when
// LOAM_BUILD_TF_PROVIDER=1):
//
//	GOBIN=$HOME/.cache/loam/terraform-provider-aws/$V go install -ldflags="-s -w" \
//	  github.com/hashicorp/terraform-provider-aws@$V
const ProviderVersion = "v1.60.1-0.20260602190131-5f2286d6d836"

// providerMirrorVersion is the version the filesystem mirror presents it as (the module
// requires >= 6.10, < 7).
const providerMirrorVersion = "6.99.0"

func providerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOAM_TF_PROVIDER"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "loam", "terraform-provider-aws", ProviderVersion, "terraform-provider-aws")
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("the hashicorp/aws provider is not built on this machine (%s); build it once with LOAM_BUILD_TF_PROVIDER=1 bash .ci/tools.sh (about 44 minutes)", p)
		if os.Getenv("LOAM_REQUIRE_TF_PROVIDER") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// emulatorRoot is the root module the test applies: a VPC with three subnets, and the Loam
// module on it, with the provider pointed at moto_server the way LocalStack users do.
const emulatorRoot = `
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 6.10, < 7.0" }
  }
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
  endpoints {
    applicationautoscaling = "%[1]s"
    cloudwatch             = "%[1]s"
    dynamodb               = "%[1]s"
    ec2                    = "%[1]s"
    ecs                    = "%[1]s"
    elbv2                  = "%[1]s"
    iam                    = "%[1]s"
    kms                    = "%[1]s"
    lambda                 = "%[1]s"
    logs                   = "%[1]s"
    s3                     = "%[1]s"
    scheduler              = "%[1]s"
    secretsmanager         = "%[1]s"
    sqs                    = "%[1]s"
    ssm                    = "%[1]s"
    sts                    = "%[1]s"
  }
}

resource "aws_vpc" "test" {
  cidr_block = "10.0.0.0/16"
}

resource "aws_subnet" "test" {
  for_each          = { "us-east-1a" = "10.0.1.0/24", "us-east-1b" = "10.0.2.0/24", "us-east-1c" = "10.0.3.0/24" }
  vpc_id            = aws_vpc.test.id
  availability_zone = each.key
  cidr_block        = each.value
}

# The cluster identity's secret (its value does not matter to apply).
resource "aws_secretsmanager_secret" "identity" {
  name                    = "loam-emu/cluster-identity"
  recovery_window_in_days = 0
}

module "loam" {
  source = "%[2]s"

  name                      = "loam-emu"
  vpc_id                    = aws_vpc.test.id
  subnet_ids                = { for z, s in aws_subnet.test : z => s.id }
  sequencer_image           = "public.ecr.aws/loam/sequencer:test"
  lognode_image             = "public.ecr.aws/loam/lognode:test"
  functions_dir             = "%[3]s"
  sequencer_ami_id          = "ami-12c6146b"
  bucket_force_destroy      = true
  table_deletion_protection = false
  emulator_unsupported      = ["sqs_redrive_allow_policy", "aws_managed_policies", "application_autoscaling", "cloudwatch_alarms", "express_directory_buckets"]

  cluster_identity        = { secret_arn = aws_secretsmanager_secret.identity.arn, server_name = "sequencer.loam" }
  vpc_interface_endpoints = ["sqs", "secretsmanager"]
  namespace_keys_enabled  = true
}

output "http_endpoint" { value = module.loam.http_endpoint }
output "bucket_name" { value = module.loam.bucket_name }
`

// TestEmulatorApply runs terraform init, validate, plan, apply and destroy of the module
// against moto_server, and checks what moto holds after apply: the bucket and its wal/
// notification to the queue, the queue and the segmenter's mapping, the table with TTL, the
// four functions and their schedules, the ECS cluster and services, the load balancer's
// listeners, the alarms.
func TestEmulatorApply(t *testing.T) {
	if testing.Short() {
		t.Skip("applies the whole module (minutes)")
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH")
	}
	provider := providerBinary(t)
	moto := testserver.StartMoto(t)
	dir := t.TempDir()

	// The functions' zips, as functions/build.sh writes them (the module's architecture is arm64).
	zips := filepath.Join(dir, "functions")
	build := exec.Command("bash", filepath.Join(repoRoot(t), "functions", "build.sh"), "-o", zips, "-arch", "arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("functions/build.sh: %v\n%s", err, out)
	}

	mirror := filepath.Join(dir, "mirror")
	pdir := filepath.Join(mirror, "registry.terraform.io", "hashicorp", "aws", providerMirrorVersion, "linux_amd64")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(provider, filepath.Join(pdir, "terraform-provider-aws_v"+providerMirrorVersion)); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "terraformrc")
	os.WriteFile(cli, fmt.Appendf(nil, "provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"hashicorp/aws\"]\n  }\n  direct {\n    exclude = [\"hashicorp/aws\"]\n  }\n}\n", mirror), 0o644)
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	if err := os.WriteFile(filepath.Join(root, "main.tf"), fmt.Appendf(nil, emulatorRoot, moto, modulePath(t), zips), 0o644); err != nil {
		t.Fatal(err)
	}
	tfCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command(tf, append([]string{"-chdir=" + root}, args...)...)
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cli, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
			"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
		return cmd
	}
	run := func(timeout time.Duration, args ...string) string {
		t.Helper()
		cmd := tfCmd(args...)
		start := time.Now()
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			cmd.Process.Kill()
			<-done
			t.Fatalf("terraform %s: still running after %v\n%s", args[0], timeout, tail(out, 4000))
		}
		t.Logf("terraform %s: %v", args[0], time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, tailErrors(out))
		}
		return string(out)
	}
	run(2*time.Minute, "init", "-input=false", "-no-color")
	run(2*time.Minute, "validate", "-no-color")
	run(5*time.Minute, "plan", "-input=false", "-no-color", "-out=plan")
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			tfCmd("destroy", "-auto-approve", "-input=false", "-no-color").Run()
		}
	})
	run(15*time.Minute, "apply", "-input=false", "-no-color", "plan")

	checkMoto(t, moto)
	out := run(2*time.Minute, "state", "list")
	for _, want := range []string{
		"module.loam.aws_s3_bucket_notification.data", "module.loam.aws_lambda_event_source_mapping.segmenter",
		`module.loam.aws_scheduler_schedule.sweep["gc"]`, `module.loam.aws_lb_listener.lognode["http"]`,
		`module.loam.aws_lb_listener.lognode["grpc"]`, `module.loam.aws_lb_listener.lognode["kafka"]`,
		`module.loam.aws_lb_listener.lognode["otlpg"]`, `module.loam.aws_lb_listener.lognode["otlph"]`,
		`module.loam.aws_ecs_service.lognode["us-east-1a"]`, `module.loam.aws_lambda_function.function["segmenter"]`,

		"module.loam.aws_kms_key.data[0]",
		`module.loam.aws_vpc_endpoint.gateway["s3"]`, `module.loam.aws_vpc_endpoint.gateway["dynamodb"]`,
		`module.loam.aws_vpc_endpoint.interface["sqs"]`, "module.loam.aws_iam_role_policy.lognode_execution_identity[0]",
		`module.loam.aws_iam_role_policy.function_identity["segmenter"]`,
		`module.loam.aws_instance.sequencer["seq-3"]`, "module.loam.aws_vpc_security_group_ingress_rule.lognode_journal_from_lognode",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("state lacks %s", want)
		}
	}
	// moto deletes an SQS queue, but answers later calls on it with an error code the
	// provider's deletion waiter does not take for "gone", so it waits for ever: the queues
	// leave the state first and are deleted through the API.
	run(2*time.Minute, "state", "rm", "module.loam.aws_sqs_queue.wal_events", "module.loam.aws_sqs_queue.wal_events_dlq")
	// moto keeps a terminated instance's primary network interface attached, so the
	// sequencer's interfaces cannot be detached and deleted there: destroy must leave
	// nothing else behind and fail for no other reason.
	start := time.Now()
	dout, derr := tfCmd("destroy", "-auto-approve", "-input=false", "-no-color").CombinedOutput()
	t.Logf("terraform destroy: %v", time.Since(start).Round(time.Millisecond))
	destroyed = true
	if derr != nil {
		for _, line := range strings.Split(string(dout), "\n") {
			if strings.HasPrefix(line, "Error: ") && !(strings.Contains(line, "detaching EC2 Network Interface") && strings.Contains(line, "cannot be detached")) {
				t.Fatalf("terraform destroy: %s\n%s", line, tailErrors(dout))
			}
		}
	}
	sq := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto), Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	qs, err := sq.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String("loam-emu-")})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range qs.QueueUrls {
		if _, err := sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			t.Errorf("delete queue %s: %v", u, err)
		}
	}
	for _, left := range strings.Fields(run(time.Minute, "state", "list")) {
		// The interfaces stay, and with them the security group they are in and the
		// subnets and VPC they are in; data sources are re-read, not destroyed.
		if !strings.HasPrefix(left, "module.loam.aws_network_interface.sequencer[") && left != "module.loam.aws_security_group.sequencer" &&
			!strings.HasPrefix(left, "aws_subnet.test[") && left != "aws_vpc.test" && !strings.Contains(left, "data.") {
			t.Errorf("destroy left %s", left)
		}
	}
}

// checkMoto asks moto, through the AWS APIs, for what the apply must have made: the bucket
// with its wal/ notification to the queue, both queues, and the table with TTL on
// expires_at. (Terraform read every other resource back from moto after creating it: the
// state list below shows them.)
func checkMoto(t *testing.T, moto string) {
	t.Helper()
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto), Credentials: creds, UsePathStyle: true})
	buckets, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var bucket string
	for _, b := range buckets.Buckets {
		if strings.HasPrefix(aws.ToString(b.Name), "loam-emu-data-") {
			bucket = aws.ToString(b.Name)
		}
	}
	if bucket == "" {
		t.Fatal("moto holds no loam-emu-data-* bucket")
	}
	nc, err := s3c.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String(bucket)})
	if err != nil || len(nc.QueueConfigurations) != 1 || !strings.HasSuffix(aws.ToString(nc.QueueConfigurations[0].QueueArn), ":loam-emu-wal-events") {
		t.Errorf("bucket notification: %+v %v", nc, err)
	}
	sq := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto), Credentials: creds})
	qs, err := sq.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("loam-emu-wal-events")})
	if err != nil || len(qs.QueueUrls) != 2 {
		t.Errorf("queues %v %v (want the wal/ queue and its DLQ)", qs, err)
	}
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto), Credentials: creds})
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("loam-emu-coord")})
	if err != nil || ttl.TimeToLiveDescription == nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expires_at" {
		t.Errorf("table TTL: %+v %v", ttl, err)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// tailErrors is terraform's output from its first error on (or its tail).
func tailErrors(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "Error: "); i >= 0 {
		return tail([]byte(s[max(0, i-200):]), 8000)
	}
	return tail(b, 6000)
}

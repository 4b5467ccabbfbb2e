package pricing

// Compute, queue and network prices (us-east-1, on-demand, read on AsOf like the others).
// Each group names its pricing page.

// Lambda: https://aws.amazon.com/lambda/pricing/ (requests; duration per GB-second, Arm).
const (
	LambdaRequestsPerMillion = 0.20
	LambdaArmPerGBSecond     = 0.0000133334
)

// SQS: https://aws.amazon.com/sqs/pricing/ (standard queues, per million requests past the
// free tier; each 64 KiB of a payload is one request).
const SQSRequestsPerMillion = 0.40

// Fargate: https://aws.amazon.com/fargate/pricing/ (Linux/ARM, per hour).
const (
	FargateArmPerVCPUHour = 0.03238
	FargateArmPerGBHour   = 0.00356
)

// EC2: https://aws.amazon.com/ec2/pricing/on-demand/ (Linux, per hour) and EBS:
// https://aws.amazon.com/ebs/pricing/ (gp3 storage per GB-month, 3,000 IOPS and 125 MB/s
// included).
const (
	EC2M7gLargePerHour   = 0.0816 // 2 vCPU, 8 GiB: a sequencer voter
	EC2M7gXLargePerHour  = 0.1632 // 4 vCPU, 16 GiB
	EC2M7g2XLargePerHour = 0.3264 // 8 vCPU, 32 GiB
	EBSGp3PerGBMonth     = 0.08
)

// Elastic Load Balancing: https://aws.amazon.com/elasticloadbalancing/pricing/ (Network
// Load Balancer: per hour, and per NLCU-hour; for TCP one NLCU is 1 GB processed per hour,
// 800 new connections per second or 100,000 active ones, whichever is highest).
const (
	NLBPerHour     = 0.0225
	NLBPerNLCUHour = 0.006
)

// HoursPerMonth and SecondsPerMonth are the 730-hour month the AWS calculator uses.
const (
	HoursPerMonth   = 730
	SecondsPerMonth = HoursPerMonth * 3600
)

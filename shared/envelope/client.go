package envelope

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// NewKMSClient is a KMS API client: the AWS SDK's default configuration (region and
// credentials from the environment, the instance or task role), at endpoint when it is set
// (a KMS emulator such as the embedded local-kms, LocalStack or moto). An endpoint without
// AWS credentials in the environment signs with static test credentials, which emulators
// accept. region overrides the configured one (default us-east-1).
func NewKMSClient(ctx context.Context, endpoint, region string) (*kms.Client, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("envelope: KMS client: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

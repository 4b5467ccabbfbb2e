package envelope

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// Admin is the part of the AWS KMS API that namespace key administration calls (*kms.Client
// has it): creating a namespace's key, and shredding it.
type Admin interface {
	CreateKey(ctx context.Context, in *kms.CreateKeyInput, opts ...func(*kms.Options)) (*kms.CreateKeyOutput, error)
	DisableKey(ctx context.Context, in *kms.DisableKeyInput, opts ...func(*kms.Options)) (*kms.DisableKeyOutput, error)
	ScheduleKeyDeletion(ctx context.Context, in *kms.ScheduleKeyDeletionInput, opts ...func(*kms.Options)) (*kms.ScheduleKeyDeletionOutput, error)
}

// CreateKey creates a symmetric KMS key for namespace ns and answers its ARN.
func CreateKey(ctx context.Context, a Admin, ns string) (string, error) {
	out, err := a.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("loam namespace " + ns),
		KeySpec: kmstypes.KeySpecSymmetricDefault, KeyUsage: kmstypes.KeyUsageTypeEncryptDecrypt,
		Tags: []kmstypes.Tag{{TagKey: aws.String("loam:namespace"), TagValue: aws.String(ns)}}})
	if err != nil {
		return "", fmt.Errorf("envelope: namespace %s: create a KMS key: %w", ns, err)
	}
	if out.KeyMetadata == nil || aws.ToString(out.KeyMetadata.Arn) == "" {
		return "", fmt.Errorf("envelope: namespace %s: KMS created a key without an ARN", ns)
	}
	return aws.ToString(out.KeyMetadata.Arn), nil
}

// ShredKey disables KMS key arn and schedules its deletion after pendingDays (7-30): from
// then on no log node can unwrap the namespace's key-encryption keys. A key already
// pending deletion is not an error (a repeated shred).
func ShredKey(ctx context.Context, a Admin, arn string, pendingDays int) error {
	if pendingDays < 7 || pendingDays > 30 {
		return fmt.Errorf("envelope: key deletion waiting period of %d days, want 7-30", pendingDays)
	}
	var invalid *kmstypes.KMSInvalidStateException
	if _, err := a.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(arn)}); err != nil && !errors.As(err, &invalid) {
		return fmt.Errorf("envelope: disable KMS key %s: %w", arn, err)
	}
	_, err := a.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: aws.String(arn), PendingWindowInDays: aws.Int32(int32(pendingDays))})
	if err != nil && !errors.As(err, &invalid) {
		return fmt.Errorf("envelope: schedule the deletion of KMS key %s: %w", arn, err)
	}
	return nil
}

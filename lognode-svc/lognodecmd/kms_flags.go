package lognodecmd

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/envelope"
)

// kmsFlags configure envelope encryption of namespaces with a key (node.Config's
// encryption block, docs/encryption.md).
type kmsFlags struct {
	kms, endpoint, region string
	refresh, rotate       time.Duration
}

func (f *kmsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kms, "kms", env("LOAM_KMS", ""), `KMS for namespace keys: "aws" (the AWS SDK's default configuration and the task role) or empty (none: namespaces with a key answer key_unavailable on this node); --kms-endpoint implies aws`)
	fs.StringVar(&f.endpoint, "kms-endpoint", env("LOAM_KMS_ENDPOINT", ""), "KMS API endpoint URL (local-kms, LocalStack, moto; default: AWS's)")
	fs.StringVar(&f.region, "kms-region", env("LOAM_KMS_REGION", ""), "KMS region (default: the AWS configuration's, else us-east-1)")
	fs.DurationVar(&f.refresh, "key-refresh", time.Second, "how often the node lists the namespace keys (rotations, shreds)")
	fs.DurationVar(&f.rotate, "key-rotate", time.Hour, "how long one key-encryption key seals new chunks of a namespace (one KMS GenerateDataKey per namespace, node and period)")
}

func (f *kmsFlags) apply(ctx context.Context, cfg *node.Config) error {
	cfg.KeyRefresh, cfg.KeyRotate = f.refresh, f.rotate
	switch {
	case f.kms == "" && f.endpoint == "":
		return nil
	case f.kms != "" && f.kms != "aws":
		return fmt.Errorf(`--kms %q: want "aws" or empty`, f.kms)
	case f.refresh <= 0 || f.rotate <= 0:
		return fmt.Errorf("--key-refresh %v and --key-rotate %v must be positive", f.refresh, f.rotate)
	}
	c, err := envelope.NewKMSClient(ctx, f.endpoint, f.region)
	if err != nil {
		return err
	}
	cfg.KMS, cfg.KMSAdmin = c, c
	return nil
}

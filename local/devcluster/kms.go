package devcluster

import (
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/loamhq/loam/shared/envelope"
)

// The log node's KMS (Config.KMSEndpoint), as node.Config's interfaces: nil when none.

func kmsOrNil(c *kms.Client) envelope.KMS {
	if c == nil {
		return nil
	}
	return c
}

func kmsAdminOrNil(c *kms.Client) envelope.Admin {
	if c == nil {
		return nil
	}
	return c
}

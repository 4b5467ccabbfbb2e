package devcluster

import (
	"context"
	"log/slog"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// functionKeys is the segmenter's and compaction's namespace key catalog, with a KMS
// client at endpoint (FunctionsConfig.KMSEndpoint; none when empty: keyed namespaces then
// stay in the WAL).
func functionKeys(client meta.Client, bucket objstore.Bucket, endpoint string, log *slog.Logger) (*envelope.Catalog, error) {
	var k envelope.KMS
	if endpoint != "" {
		c, err := envelope.NewKMSClient(context.Background(), endpoint, "")
		if err != nil {
			return nil, err
		}
		k = c
	}
	return envelope.FunctionKeys(client, bucket, k, log)
}

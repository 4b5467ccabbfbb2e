package fnenv

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/loamhq/loam/shared/envelope"
)

// Keys is the namespace key catalog of a function that rewrites data (the segmenter,
// compaction; docs/encryption.md), from its environment:
//
//	LOAM_KMS           "aws": keyed namespaces' data is opened and sealed with keys from KMS
//	                   (the function's role needs kms:GenerateDataKey and kms:Decrypt on the
//	                   namespace keys); empty: no KMS, their partitions stay in the WAL
//	LOAM_KMS_ENDPOINT  a KMS API endpoint (an emulator); default AWS's (implies aws)
//	LOAM_KMS_REGION    the KMS region; default the function's
//	LOAM_SEGMENT_SSE_KMS  "true": each sealed segment's PUT also asks S3 for SSE-KMS with the
//	                   namespace's key
//	LOAM_SEGMENT_PAGE_BYTES  plaintext bytes per sealed page (default 64KiB, 4KiB-16MiB)
//
// There is always a catalog (without KMS too), so a keyed namespace's partitions are never
// segmented in clear.
type Keys struct {
	Catalog  *envelope.Catalog
	SSEKMS   bool
	PageSize int
}

// LoadKeys reads the variables above.
func (e *Env) LoadKeys(ctx context.Context) (Keys, error) {
	var k Keys
	mode, endpoint := os.Getenv("LOAM_KMS"), os.Getenv("LOAM_KMS_ENDPOINT")
	if mode != "" && mode != "aws" {
		return k, fmt.Errorf(`%w: LOAM_KMS %q: want "aws" or empty`, ErrEnv, mode)
	}
	if v := os.Getenv("LOAM_SEGMENT_SSE_KMS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return k, fmt.Errorf("%w: LOAM_SEGMENT_SSE_KMS %q: want true or false", ErrEnv, v)
		}
		k.SSEKMS = b
	}
	page, err := Bytes("LOAM_SEGMENT_PAGE_BYTES", 0)
	if err != nil {
		return k, err
	}
	if page != 0 && (page < envelope.MinPageSize || page > envelope.MaxPageSize) {
		return k, fmt.Errorf("%w: LOAM_SEGMENT_PAGE_BYTES %d: want %d-%d", ErrEnv, page, envelope.MinPageSize, envelope.MaxPageSize)
	}
	k.PageSize = int(page)
	var client envelope.KMS
	if mode == "aws" || endpoint != "" {
		c, err := envelope.NewKMSClient(ctx, endpoint, os.Getenv("LOAM_KMS_REGION"))
		if err != nil {
			return k, fmt.Errorf("fnenv: LOAM_KMS: %w", err)
		}
		client = c
	}
	if k.Catalog, err = envelope.FunctionKeys(e.Meta, e.Bucket, client, e.Logger); err != nil {
		return k, err
	}
	return k, nil
}

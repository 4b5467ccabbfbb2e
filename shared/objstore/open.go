package objstore

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Open returns the bucket a URL names:
//
//	mem://                                  a new, empty in-memory bucket
//	file:///abs/dir  or  /abs/dir, rel/dir  a filesystem bucket rooted at dir
//	s3://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1&path_style=true&create_bucket=true
//
// s3 URLs take credentials from the SDK's default chain (AWS_ACCESS_KEY_ID, ...); the
// endpoint defaults to AWS_ENDPOINT_URL, else AWS. checksums=false turns request
// checksums off for S3 APIs that reject them (S3Config.NoChecksums).
func Open(ctx context.Context, rawURL string) (Bucket, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		if rawURL == "" {
			return nil, fmt.Errorf("objstore: open: empty URL")
		}
		return openFS(rawURL)
	}
	switch scheme {
	case "mem":
		if rest != "" {
			return nil, fmt.Errorf("objstore: open %s: mem:// takes no name", rawURL)
		}
		return NewMem(), nil
	case "file":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("objstore: open %s: %w", rawURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("objstore: open %s: file URL needs an absolute path (file:///dir)", rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("objstore: open %s: empty path", rawURL)
		}
		return openFS(u.Path)
	case "s3":
		cfg, err := parseS3URL(rawURL)
		if err != nil {
			return nil, err
		}
		return NewS3(ctx, cfg)
	default:
		return nil, fmt.Errorf("objstore: open %s: unknown scheme %q (want mem, file or s3)", rawURL, scheme)
	}
}

func openFS(dir string) (Bucket, error) {
	b, err := NewFS(dir)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// parseS3URL reads s3://bucket/prefix?endpoint=..&region=..&path_style=..&create_bucket=..&checksums=..
func parseS3URL(rawURL string) (S3Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return S3Config{}, fmt.Errorf("objstore: open %s: %w", rawURL, err)
	}
	if u.Host == "" {
		return S3Config{}, fmt.Errorf("objstore: open %s: no bucket name", rawURL)
	}
	if u.User != nil {
		return S3Config{}, fmt.Errorf("objstore: open %s: credentials do not belong in the URL; use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", u.Redacted())
	}
	cfg := S3Config{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	for name, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "endpoint":
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "path_style", "create_bucket", "checksums":
			bv, err := strconv.ParseBool(v)
			if err != nil {
				return S3Config{}, fmt.Errorf("objstore: open %s: %s=%q: %w", rawURL, name, v, err)
			}
			switch name {
			case "path_style":
				cfg.PathStyle = bv
			case "create_bucket":
				cfg.CreateBucket = bv
			default:
				cfg.NoChecksums = !bv
			}
		default:
			return S3Config{}, fmt.Errorf("objstore: open %s: unknown parameter %q", rawURL, name)
		}
	}
	return cfg, nil
}

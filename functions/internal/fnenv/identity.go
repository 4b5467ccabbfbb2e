package fnenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretsAPI is the part of the Secrets Manager client the identity fetch uses.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// maxIdentityBytes bounds the secret read: a CA, a certificate chain and a key are a few KiB.
const maxIdentityBytes = 64 << 10

// identityFromSecret fetches the cluster identity named by LOAM_CLUSTER_IDENTITY_SECRET (a
// Secrets Manager secret holding JSON {"ca", "cert", "key"}, PEM each), writes the three PEMs
// to dir (mode 0600) and returns their paths, for when LOAM_CLUSTER_CA, LOAM_CLUSTER_CERT and
// LOAM_CLUSTER_KEY are unset (Lambda has no secrets injection; the Terraform module sets the
// ARN).
func identityFromSecret(ctx context.Context, api SecretsAPI, secretID, dir string) (ca, cert, key string, err error) {
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretID)})
	if err != nil {
		return "", "", "", fmt.Errorf("fnenv: LOAM_CLUSTER_IDENTITY_SECRET %s: %w", secretID, err)
	}
	s := aws.ToString(out.SecretString)
	if s == "" {
		return "", "", "", fmt.Errorf("%w: LOAM_CLUSTER_IDENTITY_SECRET %s has no string value (want JSON {\"ca\", \"cert\", \"key\"})", ErrEnv, secretID)
	}
	if len(s) > maxIdentityBytes {
		return "", "", "", fmt.Errorf("%w: LOAM_CLUSTER_IDENTITY_SECRET %s is %d bytes, more than the %d a cluster identity takes", ErrEnv, secretID, len(s), maxIdentityBytes)
	}
	var id map[string]string
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		return "", "", "", fmt.Errorf("%w: LOAM_CLUSTER_IDENTITY_SECRET %s is not JSON {\"ca\", \"cert\", \"key\"}: %v", ErrEnv, secretID, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", fmt.Errorf("fnenv: cluster identity: %w", err)
	}
	paths := map[string]string{}
	for _, k := range []string{"ca", "cert", "key"} {
		pem := strings.TrimSpace(id[k])
		if !strings.HasPrefix(pem, "-----BEGIN ") {
			return "", "", "", fmt.Errorf("%w: LOAM_CLUSTER_IDENTITY_SECRET %s: %q is not a PEM block", ErrEnv, secretID, k)
		}
		p := filepath.Join(dir, k+".pem")
		if err := os.WriteFile(p, []byte(pem+"\n"), 0o600); err != nil {
			return "", "", "", fmt.Errorf("fnenv: cluster identity: %w", err)
		}
		paths[k] = p
	}
	return paths["ca"], paths["cert"], paths["key"], nil
}

// clusterIdentityFiles returns the paths of the cluster identity's PEM files: LOAM_CLUSTER_CA,
// LOAM_CLUSTER_CERT and LOAM_CLUSTER_KEY when any is set, else the files fetched from
// LOAM_CLUSTER_IDENTITY_SECRET into the function's /tmp, else none (plaintext).
func clusterIdentityFiles(ctx context.Context) (ca, cert, key string, err error) {
	ca, cert, key = os.Getenv("LOAM_CLUSTER_CA"), os.Getenv("LOAM_CLUSTER_CERT"), os.Getenv("LOAM_CLUSTER_KEY")
	secret := os.Getenv("LOAM_CLUSTER_IDENTITY_SECRET")
	if ca != "" || cert != "" || key != "" || secret == "" {
		return ca, cert, key, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return "", "", "", fmt.Errorf("fnenv: LOAM_CLUSTER_IDENTITY_SECRET: %w", err)
	}
	return identityFromSecret(ctx, secretsmanager.NewFromConfig(cfg), secret, filepath.Join(os.TempDir(), "loam-identity"))
}

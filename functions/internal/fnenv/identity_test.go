package fnenv

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/loamhq/loam/shared/tlsconf"
	"github.com/loamhq/loam/tests/testserver"
)

// TestClusterIdentityFromSecretsManager: a secret holding the cluster identity as the
// Terraform module documents it ({"ca", "cert", "key"}) on moto_server's Secrets Manager
// becomes the three PEM files the sequencer client loads.
func TestClusterIdentityFromSecretsManager(t *testing.T) {
	moto := testserver.StartMoto(t)
	dev, err := tlsconf.GenerateDev(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	val, _ := json.Marshal(map[string]string{"ca": read(dev.CA), "cert": read(dev.ClientCert), "key": read(dev.ClientKey)})
	t.Setenv("AWS_ENDPOINT_URL", moto)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	sm := secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	out, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String("loam/identity"), SecretString: aws.String(string(val))})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("LOAM_CLUSTER_CA", "")
	t.Setenv("LOAM_CLUSTER_CERT", "")
	t.Setenv("LOAM_CLUSTER_KEY", "")
	t.Setenv("LOAM_CLUSTER_IDENTITY_SECRET", aws.ToString(out.ARN))
	ca, cert, key, err := clusterIdentityFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if read(ca) != read(dev.CA) || read(cert) != read(dev.ClientCert) || read(key) != read(dev.ClientKey) {
		t.Error("the files differ from the secret's PEMs")
	}
	if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode())
	}
	src, err := tlsconf.ClusterClient(ca, cert, key, "")
	if err != nil || src == nil || !src.HasCertificate() || !src.HasCA() {
		t.Fatalf("cluster client from the fetched files: %v %v", src, err)
	}

	// Files given explicitly win; no secret read.
	t.Setenv("LOAM_CLUSTER_CA", dev.CA)
	t.Setenv("LOAM_CLUSTER_IDENTITY_SECRET", "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing")
	if ca, _, _, err := clusterIdentityFiles(t.Context()); err != nil || ca != dev.CA {
		t.Errorf("explicit LOAM_CLUSTER_CA: %q %v", ca, err)
	}
	// A missing secret fails naming it.
	t.Setenv("LOAM_CLUSTER_CA", "")
	if _, _, _, err := clusterIdentityFiles(t.Context()); err == nil || !strings.Contains(err.Error(), "secret:missing") {
		t.Errorf("missing secret: %v", err)
	}
}

type fakeSecrets string

func (f fakeSecrets) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(string(f))}, nil
}

func TestClusterIdentityBadSecrets(t *testing.T) {
	pem := "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----"
	for name, c := range map[string]struct{ value, want string }{
		"empty":    {"", "no string value"},
		"not json": {"ca=...", "not JSON"},
		"no key":   {`{"ca":"` + strings.ReplaceAll(pem, "\n", `\n`) + `","cert":"` + strings.ReplaceAll(pem, "\n", `\n`) + `"}`, `"key" is not a PEM block`},
		"too big":  {strings.Repeat("x", maxIdentityBytes+1), "more than"},
	} {
		_, _, _, err := identityFromSecret(t.Context(), fakeSecrets(c.value), "s", filepath.Join(t.TempDir(), "id"))
		if !errors.Is(err, ErrEnv) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrEnv mentioning %q", name, err, c.want)
		}
	}
}

// FuzzIdentityFromSecret: any secret value either fails with ErrEnv or yields three files
// that each hold one of its PEM values, trimmed, and a newline.
func FuzzIdentityFromSecret(f *testing.F) {
	pem := func(s string) string { return "-----BEGIN CERTIFICATE-----\n" + s + "\n-----END CERTIFICATE-----" }
	good, _ := json.Marshal(map[string]string{"ca": pem("ca"), "cert": pem("cert"), "key": pem("key")})
	f.Add(string(good))
	f.Add(`{"ca":"-----BEGIN x","cert":"-----BEGIN y","key":"-----BEGIN z","extra":1}`)
	f.Add(`{"ca":null}`)
	f.Add(`[]`)
	f.Add("")
	f.Fuzz(func(t *testing.T, value string) {
		dir := filepath.Join(t.TempDir(), "id")
		ca, cert, key, err := identityFromSecret(t.Context(), fakeSecrets(value), "s", dir)
		if err != nil {
			if !errors.Is(err, ErrEnv) {
				t.Fatalf("error not ErrEnv: %v", err)
			}
			return
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(value), &m); err != nil {
			t.Fatalf("accepted a value that is not a JSON object of strings: %v", err)
		}
		for k, p := range map[string]string{"ca": ca, "cert": cert, "key": key} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSpace(m[k]) + "\n"; string(b) != want || !strings.HasPrefix(want, "-----BEGIN ") {
				t.Fatalf("%s file %q, want %q", k, b, want)
			}
		}
	})
}

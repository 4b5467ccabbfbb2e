package main

import (
	"context"
	"strings"
	"testing"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/envelope"
)

// TestDevKMSFlags: --kms embedded starts local-kms under the data dir and points the log
// nodes at it (in process and as lognode-svc flags), a KMS key made through it works;
// --kms-endpoint passes an endpoint through; bad combinations are usage errors.
func TestDevKMSFlags(t *testing.T) {
	cfg := devcluster.Config{DataDir: t.TempDir()}
	var sup supervisedFlags
	stop, err := (&devKMSFlags{kms: "embedded"}).apply(&cfg, &sup)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.HasPrefix(cfg.KMSEndpoint, "http://127.0.0.1:") || sup.lognodeArgs != " --kms-endpoint "+cfg.KMSEndpoint || cfg.Functions.KMSEndpoint != cfg.KMSEndpoint {
		t.Fatalf("endpoint %q, lognode args %q", cfg.KMSEndpoint, sup.lognodeArgs)
	}
	c, err := envelope.NewKMSClient(context.Background(), cfg.KMSEndpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if arn, err := envelope.CreateKey(context.Background(), c, "dev"); err != nil || !strings.HasPrefix(arn, "arn:aws:kms:") {
		t.Fatalf("create a key through the embedded KMS: %q %v", arn, err)
	}
	cfg2 := devcluster.Config{DataDir: t.TempDir()}
	if _, err := (&devKMSFlags{endpoint: "http://kms.example:4566"}).apply(&cfg2, &sup); err != nil || cfg2.KMSEndpoint != "http://kms.example:4566" {
		t.Fatalf("--kms-endpoint: %q %v", cfg2.KMSEndpoint, err)
	}
	for _, f := range []devKMSFlags{{kms: "aws"}, {kms: "embedded", endpoint: "http://x"}} {
		if _, err := f.apply(&devcluster.Config{DataDir: t.TempDir()}, &sup); err == nil {
			t.Fatalf("%+v: no error", f)
		} else if _, ok := err.(usageError); !ok {
			t.Fatalf("%+v: %v, want a usage error", f, err)
		}
	}
}

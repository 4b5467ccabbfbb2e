package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loamhq/loam/local/devcluster"
	localkms "github.com/loamhq/loam/local/kms"
)

// loam dev --kms embedded | --kms-endpoint URL (docs/encryption.md): the KMS the log nodes
// get namespace keys from. embedded runs local-kms on loopback inside loam dev, its keys
// under <data-dir>/kms (kept across restarts).
type devKMSFlags struct {
	kms, endpoint string
}

func (f *devKMSFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kms, "kms", os.Getenv("LOAM_KMS"), `KMS for namespace keys (loam namespace create --encrypt): "embedded" runs local-kms on loopback with its keys in <data-dir>/kms; empty: none unless --kms-endpoint (env LOAM_KMS)`)
	fs.StringVar(&f.endpoint, "kms-endpoint", os.Getenv("LOAM_KMS_ENDPOINT"), "KMS API endpoint URL for namespace keys (local-kms, LocalStack, moto, AWS; env LOAM_KMS_ENDPOINT)")
}

// apply starts the embedded KMS if asked and points the log nodes at the KMS: cfg's for
// the single process, lognode-svc flags for a supervised cluster. The returned func stops
// what it started.
func (f *devKMSFlags) apply(cfg *devcluster.Config, sup *supervisedFlags) (func(), error) {
	switch {
	case f.kms != "" && f.kms != "embedded":
		return nil, usageError{fmt.Errorf(`dev: --kms %q: want "embedded" (or --kms-endpoint URL)`, f.kms)}
	case f.kms != "" && f.endpoint != "":
		return nil, usageError{fmt.Errorf("dev: give one of --kms embedded and --kms-endpoint")}
	}
	stop := func() {}
	endpoint := f.endpoint
	if f.kms == "embedded" {
		dir := filepath.Join(cfg.DataDir, "kms")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("dev: --kms embedded: %w", err)
		}
		srv, err := localkms.Start(dir, "")
		if err != nil {
			return nil, fmt.Errorf("dev: --kms embedded: %w", err)
		}
		endpoint, stop = srv.URL, func() { srv.Close() }
		fmt.Fprintf(os.Stdout, "loam dev: embedded KMS (local-kms) at %s, keys in %s\n", srv.URL, dir)
	}
	if endpoint == "" {
		return stop, nil
	}
	cfg.KMSEndpoint = endpoint
	cfg.Functions.KMSEndpoint = endpoint // the segmenter and compaction (both modes)
	sup.lognodeArgs += " --kms-endpoint " + endpoint
	return stop, nil
}

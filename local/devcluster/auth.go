package devcluster

import (
	"context"
	"fmt"
	"io"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
)

// startAuth stores the bootstrap admin key (adminKey, or a new one when the metastore holds
// no live admin key) and returns the log node's Authenticator and the new key ("" when
// none was made).
func startAuth(ctx context.Context, m meta.Client, adminKey string) (*auth.Authenticator, string, error) {
	var made string
	if adminKey != "" {
		if err := auth.Bootstrap(ctx, m, adminKey); err != nil {
			return nil, "", fmt.Errorf("LOAM_ADMIN_KEY: %w", err)
		}
	} else {
		var err error
		if made, err = auth.BootstrapNew(ctx, m); err != nil {
			return nil, "", err
		}
	}
	return auth.New(m, auth.Options{}), made, nil
}

// BootstrapKey is the admin key Start made (shown once by PrintBanner), or "".
func (c *Cluster) BootstrapKey() string { return c.bootstrapKey }

func (c *Cluster) printAuth(w io.Writer) {
	switch {
	case !c.cfg.Auth:
		fmt.Fprintf(w, "  API keys          off (loam dev --auth checks them)\n")
	case c.bootstrapKey != "":
		fmt.Fprintf(w, "  API keys          on; bootstrap admin key, shown once: %s\n", c.bootstrapKey)
		fmt.Fprintf(w, "                    export LOAM_API_KEY=%s\n", c.bootstrapKey)
	default:
		fmt.Fprintf(w, "  API keys          on (admin key: LOAM_ADMIN_KEY, or the one printed when the data dir was new)\n")
	}
}

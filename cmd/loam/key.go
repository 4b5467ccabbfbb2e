package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

const keyCreateUsage = `usage: loam key create (--scope-namespace NS | --admin) [flags]

Creates an API key (admin key) of one namespace, or an admin key, and prints it. The key
is shown only this once: the metastore keeps its SHA-256. Clients send it as
"Authorization: Bearer KEY" (loam: --api-key or LOAM_API_KEY).
`

const keyListUsage = `usage: loam key list [flags]

Lists the API keys (admin key): id, scope, creation time and whether revoked. Secrets are
never shown.
`

const keyRevokeUsage = `usage: loam key revoke ID [flags]

Revokes an API key (admin key). Every log node refuses it within its key cache's TTL
(2 s by default).
`

func runKeyCreate(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("key create", g)
	ns := fs.String("scope-namespace", "", "the namespace the key may use")
	admin := fs.Bool("admin", false, "an admin key: every namespace, and namespace and key administration")
	desc := fs.String("description", "", "what the key is for (shown by key list)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, keyCreateUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos); err != nil {
		return err
	}
	if *admin == (*ns != "") {
		return usagef("key create: give exactly one of --scope-namespace NS and --admin")
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	k, err := c.CreateKey(ctx, streamapi.CreateKeyRequest{Namespace: *ns, Admin: *admin, Description: *desc})
	if err != nil {
		return fmt.Errorf("key create: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, k)
	}
	fmt.Fprintf(stdout, "created key %s (%s); it is shown only now:\n%s\n", k.ID, keyScope(k.KeyInfo), k.Key)
	return nil
}

func keyScope(k streamapi.KeyInfo) string {
	if k.Admin {
		return "admin"
	}
	return "namespace " + k.Namespace
}

func runKeyList(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("key list", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, keyListUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	keys, err := c.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("key list: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, streamapi.KeyList{Keys: keys})
	}
	if len(keys) == 0 {
		fmt.Fprintln(stderr, "no keys")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tCREATED\tREVOKED\tDESCRIPTION")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedMs != 0 {
			revoked = time.UnixMilli(k.RevokedMs).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, keyScope(k), time.UnixMilli(k.CreatedMs).UTC().Format(time.RFC3339), revoked, k.Description)
	}
	return tw.Flush()
}

func runKeyRevoke(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("key revoke", g)
	pos, err := parseArgs(fs, keyRevokeUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "ID"); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := c.RevokeKey(ctx, pos[0]); err != nil {
		return fmt.Errorf("key revoke %s: %w", pos[0], err)
	}
	fmt.Fprintf(stdout, "revoked key %s\n", pos[0])
	return nil
}

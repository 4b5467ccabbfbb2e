package main

import (
	"context"
	"fmt"
	"io"

	"github.com/loamhq/loam/shared/streamapi"
)

const namespaceCreateUsage = `usage: loam namespace create NAME [--encrypt | --kms-key ARN] [flags]

Creates a namespace (admin key). Names are 1-249 characters of [a-zA-Z0-9._-].
--encrypt seals its data with a new key of the log node's KMS, --kms-key with an existing
KMS key (docs/encryption.md).
`

const namespaceListUsage = `usage: loam namespace list [flags]

Lists the namespaces (admin key).
`

const namespaceDeleteUsage = `usage: loam namespace delete NAME [flags]

Deletes an empty namespace and revokes its keys (admin key). A namespace that still holds
streams is refused (namespace_not_empty): delete them first. "default" cannot be deleted.
`

func runNamespaceCreate(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("namespace create", g)
	keys := addKeyFlags(fs) // namespace_key.go
	pos, err := parseArgs(fs, namespaceCreateUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	if err := keys.check(); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := c.CreateNamespace(ctx, pos[0]); err != nil {
		return fmt.Errorf("namespace create %s: %w", pos[0], err)
	}
	fmt.Fprintf(stdout, "created namespace %s\n", pos[0])
	return keys.attach(ctx, c, pos[0], stdout)
}

func runNamespaceList(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("namespace list", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, namespaceListUsage, args, stdout)
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
	names, err := c.ListNamespaces(ctx)
	if err != nil {
		return fmt.Errorf("namespace list: %w", err)
	}
	if *asJSON {
		out := streamapi.NamespaceList{Namespaces: make([]streamapi.Namespace, len(names))}
		for i, n := range names {
			out.Namespaces[i] = streamapi.Namespace{Name: n}
		}
		return printJSON(stdout, out)
	}
	for _, n := range names {
		fmt.Fprintln(stdout, n)
	}
	return nil
}

func runNamespaceDelete(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("namespace delete", g)
	pos, err := parseArgs(fs, namespaceDeleteUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := c.DeleteNamespace(ctx, pos[0]); err != nil {
		return fmt.Errorf("namespace delete %s: %w", pos[0], err)
	}
	fmt.Fprintf(stdout, "deleted namespace %s\n", pos[0])
	return nil
}

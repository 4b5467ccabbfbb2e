package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/loamhq/loam/shared/streamapi"
)

// loam namespace create --encrypt | --kms-key, loam namespace rotate-key, loam namespace
// shred and loam namespace key (docs/encryption.md): a namespace's customer-managed key
// over /v1/namespaces/{ns}/key. Admin key.

const namespaceRotateKeyUsage = `usage: loam namespace rotate-key NAME [--kms-key ARN | --new-key] [--json]

Starts the namespace's next key generation (admin key): log nodes seal new chunks under a
new key-encryption key from then on. --kms-key moves the namespace to another KMS key,
--new-key to a new one the log node's KMS creates. Chunks sealed before stay readable while
their KMS key exists.
`

const namespaceShredUsage = `usage: loam namespace shred NAME [--pending-days N] [--wait DURATION] [--json]

Crypto-shreds the namespace (admin key): what a user runs for an erasure request. It
disables the namespace's KMS key and schedules its deletion after --pending-days (7-30,
default 7), and returns once every live log node has dropped the namespace's keys and
cached plaintext (memory caches and on-disk block cache). From then on every read of the
namespace answers key_unavailable, and no other namespace is affected. Past --wait
(default 1m) it fails with shred_pending naming the nodes still waited for; run it again.
`

const namespaceKeyUsage = `usage: loam namespace key NAME [--json]

Shows the namespace's customer-managed key (admin key): the KMS key, its generation and
state, and the log nodes that confirmed a shred. Never key material.
`

// keyOpts are namespace create's key flags.
type keyOpts struct {
	encrypt *bool
	kmsKey  *string
}

func addKeyFlags(fs *flag.FlagSet) keyOpts {
	return keyOpts{
		encrypt: fs.Bool("encrypt", false, "seal the namespace's data with a new key of the log node's KMS"),
		kmsKey:  fs.String("kms-key", "", "seal the namespace's data with this KMS key (ARN, key id or alias)"),
	}
}

func (o keyOpts) check() error {
	if *o.encrypt && *o.kmsKey != "" {
		return usagef("namespace create: give one of --encrypt and --kms-key")
	}
	return nil
}

// attach gives the namespace just created its key, when the flags ask for one.
func (o keyOpts) attach(ctx context.Context, c *streamapi.Client, ns string, stdout io.Writer) error {
	if !*o.encrypt && *o.kmsKey == "" {
		return nil
	}
	k, err := c.AttachNamespaceKey(ctx, ns, streamapi.AttachNamespaceKeyRequest{KMSKey: *o.kmsKey, Create: *o.encrypt})
	if err != nil {
		return fmt.Errorf("namespace create %s: the namespace was created, attaching its key failed (retry with loam namespace create %s --kms-key ARN): %w", ns, ns, err)
	}
	_, err = fmt.Fprintf(stdout, "namespace %s: encrypted with KMS key %s\n", ns, k.KMSKey)
	return err
}

func printNamespaceKey(w io.Writer, k streamapi.NamespaceKey, asJSON bool) error {
	if asJSON {
		return printJSON(w, k)
	}
	_, err := fmt.Fprintf(w, "namespace %s: kms key %s, generation %d, %s", k.Namespace, k.KMSKey, k.Generation, k.State)
	if err == nil && k.State == "shredded" {
		_, err = fmt.Fprintf(w, " (confirmed by %d log nodes: %v)", len(k.Dropped), k.Dropped)
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}

func runNamespaceKey(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("namespace key", g)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, namespaceKeyUsage, args, stdout)
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
	k, err := c.GetNamespaceKey(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("namespace key %s: %w", pos[0], err)
	}
	return printNamespaceKey(stdout, k, *asJSON)
}

func runNamespaceRotateKey(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("namespace rotate-key", g)
	kmsKey := fs.String("kms-key", "", "move the namespace to this KMS key")
	newKey := fs.Bool("new-key", false, "move the namespace to a new key of the log node's KMS")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, namespaceRotateKeyUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	if *newKey && *kmsKey != "" {
		return usagef("namespace rotate-key: give one of --kms-key and --new-key")
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	k, err := c.RotateNamespaceKey(ctx, pos[0], streamapi.RotateNamespaceKeyRequest{KMSKey: *kmsKey, Create: *newKey})
	if err != nil {
		return fmt.Errorf("namespace rotate-key %s: %w", pos[0], err)
	}
	return printNamespaceKey(stdout, k, *asJSON)
}

func runNamespaceShred(ctx context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("namespace shred", g)
	days := fs.Int("pending-days", 7, "days KMS waits before deleting the key (7-30)")
	wait := fs.Duration("wait", 0, "how long to wait for every log node to confirm (default 1m)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	pos, err := parseArgs(fs, namespaceShredUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return err
	}
	if *days < 7 || *days > 30 {
		return usagef("namespace shred: --pending-days %d: KMS waits 7-30 days", *days)
	}
	if *wait < 0 {
		return usagef("namespace shred: --wait %v is negative", *wait)
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	k, err := c.ShredNamespaceKey(ctx, pos[0], streamapi.ShredNamespaceKeyRequest{PendingDays: *days, WaitMs: wait.Milliseconds()})
	if err != nil {
		return fmt.Errorf("namespace shred %s: %w", pos[0], err)
	}
	return printNamespaceKey(stdout, k, *asJSON)
}

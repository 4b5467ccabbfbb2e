package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/objstore"
)

// TestNamespaceKeyCommands, against the embedded local-kms: namespace create --encrypt
// makes a KMS key and attaches it, data produced there reads back, rotate-key starts the
// next generation, shred disables the key and returns once the node confirmed; reads of
// the namespace then answer key_unavailable. Bad flags exit 2.
func TestNamespaceKeyCommands(t *testing.T) {
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw := kms.New(kms.Options{Region: localkms.Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	mc := servertest.Client(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "cli-k", Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KMS: raw, KMSAdmin: raw,
		KeyRefresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(n.Handler())
	t.Cleanup(func() { hs.Close(); n.Close(context.Background()) })
	e := &env{t: t, url: hs.URL}

	if got := e.must("", "namespace", "create", "tenant", "--encrypt"); !strings.Contains(got, "created namespace tenant\nnamespace tenant: encrypted with KMS key arn:aws:kms:") {
		t.Fatalf("create --encrypt: %q", got)
	}
	if got := e.must("", "namespace", "key", "tenant"); !strings.Contains(got, "generation 1, active") {
		t.Fatalf("key: %q", got)
	}
	e.must("", "--namespace", "tenant", "stream", "create", "s", "--partitions", "1")
	e.must("a\nb\n", "--namespace", "tenant", "produce", "s")
	if got := e.must("", "--namespace", "tenant", "consume", "s", "--max", "2"); got != "a\nb\n" {
		t.Fatalf("consume: %q", got)
	}
	if got := e.must("", "namespace", "rotate-key", "tenant"); !strings.Contains(got, "generation 2, active") {
		t.Fatalf("rotate-key: %q", got)
	}
	e.must("c\n", "--namespace", "tenant", "produce", "s")
	if got := e.must("", "namespace", "shred", "tenant", "--pending-days", "7"); !strings.Contains(got, "shredded (confirmed by 1 log nodes: [cli-k])") {
		t.Fatalf("shred: %q", got)
	}
	if r := e.loam("", "--namespace", "tenant", "consume", "s", "--max", "1"); r.code != 1 || !strings.Contains(r.stderr, "key_unavailable") || !strings.Contains(r.stderr, "tenant") {
		t.Fatalf("consume after shred: %+v", r)
	}
	for _, tc := range []struct {
		args string
		code int
		says string
	}{
		{"namespace create x --encrypt --kms-key alias/x", 2, "one of --encrypt and --kms-key"},
		{"namespace rotate-key tenant --new-key --kms-key alias/x", 2, "one of --kms-key and --new-key"},
		{"namespace shred tenant --pending-days 3", 2, "7-30"},
		{"namespace shred", 2, "NAME"},
		{"namespace key nosuch", 1, "not_found"},
	} {
		r := e.loam("", args(tc.args)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Fatalf("%s: exit %d, stderr %q; want %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.says)
		}
	}
}

package objstore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		want string // type of the bucket, "" for an error
		root string // FS root
	}{
		{"mem://", "mem", ""},
		{"file://" + dir + "/a", "fs", dir + "/a"},
		{"file://localhost" + dir + "/b", "fs", dir + "/b"},
		{dir + "/c", "fs", dir + "/c"},
		{"s3://bkt/some/prefix?region=eu-west-1&endpoint=http://127.0.0.1:1&path_style=true", "s3", ""},
		{"", "", ""},
		{"mem://name", "", ""},
		{"file://relative/dir", "", ""},
		{"file://", "", ""},
		{"ftp://host/x", "", ""},
		{"s3://", "", ""},
		{"s3:///prefix", "", ""},
		{"s3://bkt?path_style=maybe", "", ""},
		{"s3://bkt?colour=blue", "", ""},
		{"s3://key:secret@bkt", "", ""},
	} {
		b, err := Open(ctx, tc.url)
		var got, root string
		switch b := b.(type) {
		case *Mem:
			got = "mem"
		case *FS:
			got, root = "fs", b.Dir()
		case *S3:
			got = "s3"
		}
		if got != tc.want || root != tc.root || (err == nil) != (tc.want != "") {
			t.Errorf("Open(%q) = %s %q, %v; want %q %q", tc.url, got, root, err, tc.want, tc.root)
		}
	}

	rel := t.TempDir()
	t.Chdir(rel)
	b, err := Open(ctx, "relative/dir")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.(*FS).Dir(); got != filepath.Join(rel, "relative/dir") {
		t.Errorf("Open(relative/dir).Dir() = %q", got)
	}
}

func TestParseS3URL(t *testing.T) {
	cfg, err := parseS3URL("s3://bkt/a/b/?endpoint=http://h:9000&region=r1&path_style=1&create_bucket=true")
	if err != nil {
		t.Fatal(err)
	}
	want := S3Config{Bucket: "bkt", Prefix: "a/b/", Endpoint: "http://h:9000", Region: "r1", PathStyle: true, CreateBucket: true}
	if cfg != want {
		t.Errorf("parseS3URL = %+v, want %+v", cfg, want)
	}
	cfg, err = parseS3URL("s3://bkt")
	if err != nil || cfg != (S3Config{Bucket: "bkt"}) {
		t.Errorf("parseS3URL(s3://bkt) = %+v, %v", cfg, err)
	}
	for v, off := range map[string]bool{"false": true, "0": true, "true": false} {
		cfg, err = parseS3URL("s3://bkt?checksums=" + v)
		if err != nil || cfg != (S3Config{Bucket: "bkt", NoChecksums: off}) {
			t.Errorf("parseS3URL(checksums=%s) = %+v, %v", v, cfg, err)
		}
	}
	if _, err := parseS3URL("s3://bkt?checksums=maybe"); err == nil || !strings.Contains(err.Error(), "checksums") {
		t.Errorf("checksums=maybe: err = %v, want one naming checksums", err)
	}
}

func TestNewS3Prefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "p": "p/", "p/": "p/", "/p/q": "p/q/"} {
		b, err := NewS3(context.Background(), S3Config{Bucket: "b", Prefix: in, Region: "us-east-1", AccessKey: "a", SecretKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if b.prefix != want {
			t.Errorf("prefix %q became %q, want %q", in, b.prefix, want)
		}
	}
	if _, err := NewS3(context.Background(), S3Config{}); err == nil {
		t.Error("NewS3 without a bucket name succeeded")
	}
}

package fsm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// TestKeyTraces replays the golden traces of testdata/trace_keys: the commands of
// TestTraces plus
//
//	create-key <id> ns=<ns>|admin secret=<s>   store a key whose hash is SHA-256(<s>)
//	revoke-key <id>
//	lookup-key <secret>                        find a key by the hash of <secret>
//	list-keys
//	delete-ns <name>
func TestKeyTraces(t *testing.T) {
	files, _ := filepath.Glob("testdata/trace_keys/*.txt")
	if len(files) == 0 {
		t.Fatal("no traces")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t)
			stamp := t0
			lines := strings.Split(string(b), "\n")
			for i := 0; i < len(lines); i++ {
				cmd := strings.TrimSpace(lines[i])
				if cmd == "" || strings.HasPrefix(cmd, "#") {
					continue
				}
				lineNo := i + 1
				if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
					t.Fatalf("%s:%d: want ---- after the command", file, lineNo)
				}
				i += 2
				var want []string
				for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
					want = append(want, strings.TrimSpace(lines[i]))
				}
				got, ok := runTraceKeys(h, stamp, cmd)
				if !ok {
					got = runTrace(t, h, &stamp, cmd)
				}
				if got != strings.Join(want, "\n") {
					t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", file, lineNo, cmd, got, strings.Join(want, "\n"))
				}
			}
		})
	}
}

func keyErrName(err error) string {
	for _, e := range []error{meta.ErrKeyNotFound, meta.ErrKeyExists, meta.ErrNamespaceNotEmpty} {
		if errors.Is(err, e) {
			return "error: " + e.Error()
		}
	}
	return errName(err)
}

func keyOut(k meta.APIKey) string {
	scope := "ns=" + k.Namespace
	if k.Admin {
		scope = "admin"
	}
	s := fmt.Sprintf("key %s %s created=%s", k.ID, scope, rel(k.CreatedMs))
	if k.Revoked() {
		s += " revoked=" + rel(k.RevokedMs)
	}
	if k.Hash != nil {
		s += fmt.Sprintf(" hash=%x", k.Hash[:4])
	}
	return s
}

func runTraceKeys(h *harness, stamp int64, line string) (string, bool) {
	f := strings.Fields(line)
	switch f[0] {
	case "create-key":
		k := meta.APIKey{ID: f[1]}
		for _, a := range f[2:] {
			switch k2, v, _ := strings.Cut(a, "="); k2 {
			case "admin":
				k.Admin = true
			case "ns":
				k.Namespace = v
			case "secret":
				k.Hash = meta.KeyHash(v)
			case "hashlen":
				k.Hash = make([]byte, len(v))
			}
		}
		r := h.apply(stamp, CreateKey(k))
		if r.Err != nil {
			return keyErrName(r.Err), true
		}
		return keyOut(r.Key), true
	case "revoke-key":
		if r := h.apply(stamp, RevokeKey(f[1])); r.Err != nil {
			return keyErrName(r.Err), true
		}
		return "ok", true
	case "lookup-key":
		k, err := h.f.LookupKey(meta.KeyHash(f[1]))
		if err != nil {
			return keyErrName(err), true
		}
		return keyOut(k), true
	case "list-keys":
		ks, err := h.f.ListKeys()
		if err != nil {
			return keyErrName(err), true
		}
		out := []string{fmt.Sprintf("%d keys", len(ks))}
		for _, k := range ks {
			out = append(out, keyOut(k))
		}
		return strings.Join(out, "\n"), true
	case "delete-ns":
		if r := h.apply(stamp, DeleteNamespace(f[1])); r.Err != nil {
			return keyErrName(r.Err), true
		}
		return "ok", true
	case "namespaces":
		ns, err := h.f.ListNamespaces()
		if err != nil {
			return keyErrName(err), true
		}
		return strings.Join(ns, ","), true
	}
	return "", false
}

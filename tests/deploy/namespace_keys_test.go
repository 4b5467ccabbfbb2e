package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestNamespaceKeysFunctions: with namespace_keys_enabled the segmenter and compaction
// (and only they) run with LOAM_KMS=aws and LOAM_SEGMENT_SSE_KMS, which fnenv reads;
// without it neither is set. Their KMS grants are conditioned on a loam:namespace
// encryption context or on S3 as the caller.
func TestNamespaceKeysFunctions(t *testing.T) {
	c := loadDir(t, modulePath(t))
	fn := c.resources["aws_lambda_function.function"]
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "functions", "internal", "fnenv", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		vars := baseVars(3, ecrSequencer, ecrLognode)
		vars["namespace_keys_enabled"] = cty.BoolVal(on)
		e := evaluate(t, c, vars)
		fns := e.locals["functions"]
		for _, name := range []string{"segmenter", "compaction", "retention", "gc"} {
			env := stringMap(e.value(t, attr(t, mustBlock(t, fn.Body, "environment"), "variables"), e.with(name, fns.GetAttr(name))))
			keyed := on && (name == "segmenter" || name == "compaction")
			if (env["LOAM_KMS"] == "aws") != keyed || (env["LOAM_SEGMENT_SSE_KMS"] == "true") != keyed {
				t.Errorf("namespace_keys_enabled=%v: %s has LOAM_KMS %q, LOAM_SEGMENT_SSE_KMS %q", on, name, env["LOAM_KMS"], env["LOAM_SEGMENT_SSE_KMS"])
			}
			for k := range env {
				if strings.HasPrefix(k, "LOAM_KMS") || k == "LOAM_SEGMENT_SSE_KMS" {
					if !strings.Contains(string(src), `"`+k+`"`) {
						t.Errorf("the module sets %s, which fnenv never reads", k)
					}
				}
			}
		}
	}
	docs, _ := c.rolePolicies(t)
	found := 0
	for _, ds := range docs["aws_iam_role.function"] {
		for _, s := range c.statements(t, ds) {
			for _, a := range s.actions {
				if !strings.HasPrefix(a, "kms:") || s.sid == "DataKeys" {
					continue
				}
				found++
				cond := mustBlock(t, s.body, "condition")
				v := exprSource(t, attr(t, cond, "variable"))
				if !strings.Contains(v, "kms:EncryptionContext:loam:namespace") && !strings.Contains(v, "kms:ViaService") {
					t.Errorf("statement %s grants %s on condition %s", s.sid, a, v)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no function role may use namespace keys")
	}
}

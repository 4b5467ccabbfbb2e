package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestFunctions checks the four Lambda functions: the runtime the zips are built for, their
// environment against what functions/internal/fnenv reads, the VPC, the queue mapping with
// partial batch responses, a schedule per sweep, and each role's grants.
func TestFunctions(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(3, ecrSequencer, ecrLognode))
	fn := c.resources["aws_lambda_function.function"]
	if fn == nil {
		t.Fatal("no aws_lambda_function.function")
	}
	fns := e.locals["functions"]
	want := []string{"compaction", "gc", "retention", "segmenter"}
	var got []string
	for it := fns.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		got = append(got, k.AsString())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("functions %v, want %v", got, want)
	}
	for _, name := range want {
		// Every function has a main under functions/ that functions/build.sh builds.
		if _, err := os.Stat(filepath.Join(repoRoot(t), "functions", name, "main.go")); err != nil {
			t.Errorf("function %s has no functions/%s/main.go", name, name)
		}
		ctx := e.with(name, fns.GetAttr(name))
		for attrName, want := range map[string]string{"runtime": "provided.al2023", "handler": "bootstrap", "filename": "dist/functions/" + name + "-arm64.zip"} {
			if v := e.value(t, fn.Body.Attributes[attrName].Expr, ctx); v.AsString() != want {
				t.Errorf("%s: %s = %q, want %q", name, attrName, v.AsString(), want)
			}
		}
		env := stringMap(e.value(t, attr(t, mustBlock(t, fn.Body, "environment"), "variables"), ctx))
		for k, v := range map[string]string{
			"LOAM_BUCKET":      "s3://loam-data-x1?region=eu-west-1",
			"LOAM_SEQUENCER":   "10.0.1.10:7070,10.0.2.10:7070,10.0.3.10:7070",
			"LOAM_COORD_TABLE": "loam-coord",
			"LOAM_LOG_LEVEL":   "info",
		} {
			if env[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, env[k], v)
			}
		}
		// Settings the function's main reads must be the ones the module sets.
		src, err := os.ReadFile(filepath.Join(repoRoot(t), "functions", name, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		for k := range env {
			switch k {
			case "LOAM_BUCKET", "LOAM_SEQUENCER", "LOAM_COORD_TABLE", "LOAM_LOG_LEVEL":
				continue
			}
			if !strings.Contains(string(src), `"`+k+`"`) {
				t.Errorf("%s: the module sets %s, which functions/%s/main.go never reads", name, k, name)
			}
		}
		vpc := mustBlock(t, fn.Body, "vpc_config")
		if !c.refersTo(attr(t, vpc, "security_group_ids"), "aws_security_group.functions") {
			t.Errorf("%s: not in the functions' security group (the sequencer admits RPC from it)", name)
		}
	}

	// The segmenter is fed by the wal/ queue, with partial batch responses.
	esm := c.resources["aws_lambda_event_source_mapping.segmenter"]
	if esm == nil {
		t.Fatal("no event source mapping for the segmenter")
	}
	if !c.refersTo(attr(t, esm.Body, "event_source_arn"), "aws_sqs_queue.wal_events") {
		t.Error("the segmenter's mapping does not read the wal/ notification queue")
	}
	if l, _ := stringList(attr(t, esm.Body, "function_response_types")); strings.Join(l, ",") != "ReportBatchItemFailures" {
		t.Errorf("function_response_types %v: the segmenter answers partial batch failures", l)
	}

	// A schedule per sweep, each invoking its function with a payload the functions take as a
	// sweep (shared/notify.Classify).
	sched := c.resources["aws_scheduler_schedule.sweep"]
	if sched == nil {
		t.Fatal("no aws_scheduler_schedule.sweep")
	}
	sweeps := stringMap(e.value(t, attr(t, sched.Body, "for_each"), e.ctx))
	for _, name := range want {
		if !strings.HasPrefix(sweeps[name], "rate(") {
			t.Errorf("sweep of %s: schedule %q", name, sweeps[name])
		}
	}
	target := mustBlock(t, sched.Body, "target")
	input := e.value(t, attr(t, target, "input"), e.with("gc", cty.StringVal("rate(5 minutes)"))).AsString()
	if !strings.Contains(input, `"detail-type":"Scheduled Event"`) {
		t.Errorf("schedule input %s is not a scheduled event to shared/notify", input)
	}

	// Each function's role: the bucket and table only (checkDataActions), its own log group,
	// and the queue for the segmenter alone.
	docs, managed := c.rolePolicies(t)
	if len(docs["aws_iam_role.function"]) == 0 {
		t.Fatal("aws_iam_role.function has no inline policy")
	}
	for role, ds := range docs {
		if role != "aws_iam_role.function" {
			continue
		}
		var sqs bool
		for _, d := range ds {
			for _, s := range c.statements(t, d) {
				for _, a := range s.actions {
					if strings.HasPrefix(a, "sqs:") {
						sqs = true
						if !strings.Contains(exprSource(t, s.body.Attributes["resources"].Expr), "aws_sqs_queue.wal_events.arn") {
							t.Errorf("functions may %s on something other than the wal/ queue", a)
						}
					}
					if a == "*" || strings.HasSuffix(a, ":*") {
						t.Errorf("functions' role grants %s", a)
					}
				}
			}
		}
		if !sqs {
			t.Error("no function may read the wal/ queue: the segmenter's mapping needs it")
		}
	}
	if len(managed["aws_iam_role.function"]) > 0 {
		t.Error("functions' roles have managed policies attached; keep them to the inline policy")
	}
	for _, p := range c.checkDataActions(t) {
		t.Error(p)
	}
}

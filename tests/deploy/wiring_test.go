package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func modulePath(t testing.TB) string {
	return filepath.Join(repoRoot(t), "terraform", "modules", "loam")
}
func examplePath(t testing.TB) string {
	return filepath.Join(repoRoot(t), "terraform", "examples", "complete")
}

// TestEveryDirectoryWires parses every .tf file under terraform/ and checks, per directory,
// that references resolve and that nothing declared goes unused.
func TestEveryDirectoryWires(t *testing.T) {
	dirs := tfDirs(t, filepath.Join(repoRoot(t), "terraform"))
	want := map[string]bool{modulePath(t): false, examplePath(t): false}
	for _, dir := range dirs {
		if _, ok := want[dir]; ok {
			want[dir] = true
		}
		rel, _ := filepath.Rel(repoRoot(t), dir)
		t.Run(rel, func(t *testing.T) {
			c := loadDir(t, dir)
			for _, p := range c.checkReferences() {
				t.Error(p)
			}
			for _, p := range c.checkModuleCalls() {
				t.Error(p)
			}
			requiresProvider(t, c)
		})
	}
	for dir, found := range want {
		if !found {
			t.Errorf("%s has no .tf files", dir)
		}
	}
}

// requiresProvider checks the terraform block pins Terraform and the AWS provider.
func requiresProvider(t *testing.T, c *config) {
	t.Helper()
	var tf *hclsyntax.Body
	for _, b := range c.other {
		if b.Type == "terraform" {
			tf = b.Body
		}
	}
	if tf == nil {
		t.Error("no terraform block")
		return
	}
	if stringAttr(tf, "required_version") == "" {
		t.Error("terraform block sets no required_version")
	}
	rp := blocksOf(tf, "required_providers")
	if len(rp) != 1 {
		t.Error("terraform block has no required_providers")
		return
	}
	aws, ok := rp[0].Attributes["aws"]
	if !ok {
		t.Error("required_providers has no aws")
		return
	}
	v, ok := literal(aws.Expr)
	if !ok || !v.Type().IsObjectType() || !v.Type().HasAttribute("source") || !v.Type().HasAttribute("version") {
		t.Error("required_providers.aws needs a literal source and version")
		return
	}
	if src := v.GetAttr("source").AsString(); src != "hashicorp/aws" {
		t.Errorf("aws provider source %q", src)
	}
}

func TestExampleCallsModule(t *testing.T) {
	c := loadDir(t, examplePath(t))
	m, ok := c.modules["loam"]
	if !ok {
		t.Fatal(`example declares no module "loam"`)
	}
	src := stringAttr(m.Body, "source")
	if filepath.Clean(filepath.Join(c.dir, src)) != modulePath(t) {
		t.Fatalf("example's module source %q is not terraform/modules/loam", src)
	}
	mod := loadDir(t, modulePath(t))
	required := 0
	for _, v := range mod.variables {
		if _, ok := v.Body.Attributes["default"]; !ok {
			required++
		}
	}
	if required < 4 {
		t.Errorf("the module has %d required variables; vpc_id, subnet_ids and both images should be required", required)
	}
	// checkModuleCalls is what proves every required variable is passed (TestEveryDirectoryWires).

	// The example's tfvars file sets every variable the example requires, and only those.
	b, err := os.ReadFile(filepath.Join(examplePath(t), "terraform.tfvars.example"))
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclparse.NewParser().ParseHCL(b, "terraform.tfvars.example")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	set := f.Body.(*hclsyntax.Body).Attributes
	for name, v := range c.variables {
		if _, hasDefault := v.Body.Attributes["default"]; !hasDefault {
			if _, ok := set[name]; !ok {
				t.Errorf("terraform.tfvars.example does not set required variable %q", name)
			}
		}
	}
	for name := range set {
		if _, ok := c.variables[name]; !ok {
			t.Errorf("terraform.tfvars.example sets undeclared variable %q", name)
		}
	}
	// The example's subnets are keyed by zones of its region, three of them for three voters.
	subnets, ok := literal(set["subnet_ids"].Expr)
	if !ok || subnets.LengthInt() != 3 {
		t.Fatalf("terraform.tfvars.example subnet_ids should be a literal map of three zones")
	}
	region, _ := literal(set["region"].Expr)
	for it := subnets.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		if !strings.HasPrefix(k.AsString(), region.AsString()) {
			t.Errorf("subnet zone %q is not in region %q", k.AsString(), region.AsString())
		}
	}
}

func TestVariablesDocumentedAndValidated(t *testing.T) {
	for _, dir := range []string{modulePath(t), examplePath(t)} {
		c := loadDir(t, dir)
		for _, name := range sortedKeys(c.variables) {
			v := c.variables[name]
			if strings.TrimSpace(stringAttr(v.Body, "description")) == "" {
				t.Errorf("%s: variable %q has no description", v.DefRange(), name)
			}
			typ, ok := v.Body.Attributes["type"]
			if !ok {
				t.Errorf("%s: variable %q has no type", v.DefRange(), name)
				continue
			}
			if dir != modulePath(t) || hcl.ExprAsKeyword(typ.Expr) == "bool" {
				continue
			}
			if len(blocksOf(v.Body, "validation")) == 0 {
				t.Errorf("%s: module variable %q has no validation block", v.DefRange(), name)
			}
		}
	}
	mod := loadDir(t, modulePath(t))
	for _, name := range []string{"bucket_name", "table_name", "queue_arn", "http_endpoint", "sequencer_addresses"} {
		o, ok := mod.outputs[name]
		if !ok {
			t.Errorf("module has no output %q", name)
			continue
		}
		if stringAttr(o.Body, "description") == "" {
			t.Errorf("output %q has no description", name)
		}
	}
}

// TestTemplates checks every templatefile() call: the template exists, parses, and uses exactly
// the variables the call passes. (eval_test.go renders the sequencer's user data.)
func TestTemplates(t *testing.T) {
	c := loadDir(t, modulePath(t))
	calls := 0
	for _, key := range sortedKeys(c.resources) {
		r := c.resources[key]
		for _, name := range sortedKeys(r.Body.Attributes) {
			hclsyntax.VisitAll(r.Body.Attributes[name].Expr, func(n hclsyntax.Node) hcl.Diagnostics {
				call, ok := n.(*hclsyntax.FunctionCallExpr)
				if !ok || call.Name != "templatefile" {
					return nil
				}
				calls++
				checkTemplateCall(t, c, key, call)
				return nil
			})
		}
	}
	if calls == 0 {
		t.Fatal("no templatefile call: where does the sequencer's user data come from?")
	}
}

func checkTemplateCall(t *testing.T, c *config, owner string, call *hclsyntax.FunctionCallExpr) {
	t.Helper()
	if len(call.Args) != 2 {
		t.Errorf("%s: templatefile takes 2 arguments", call.Range())
		return
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"path": cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(c.dir)}),
	}}
	pv, diags := call.Args[0].Value(ctx)
	if diags.HasErrors() {
		t.Errorf("%s: template path is not static: %s", call.Range(), diags.Error())
		return
	}
	src, err := os.ReadFile(pv.AsString())
	if err != nil {
		t.Errorf("%s: %v", owner, err)
		return
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, pv.AsString(), hcl.InitialPos)
	if diags.HasErrors() {
		t.Errorf("%s: template: %s", owner, diags.Error())
		return
	}
	obj, ok := call.Args[1].(*hclsyntax.ObjectConsExpr)
	if !ok {
		t.Errorf("%s: templatefile variables should be an object literal", owner)
		return
	}
	passed := map[string]bool{}
	for _, item := range obj.Items {
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() {
			t.Errorf("%s: template variable key is not literal", owner)
			continue
		}
		passed[k.AsString()] = true
	}
	used := map[string]bool{}
	for _, tr := range tmpl.Variables() {
		used[tr.RootName()] = true
	}
	for name := range used {
		if !passed[name] {
			t.Errorf("%s: template uses %q, which the call does not pass", owner, name)
		}
	}
	for name := range passed {
		if !used[name] {
			t.Errorf("%s: call passes %q, which the template never uses", owner, name)
		}
	}
}

// bashCheck runs bash -n on script when bash is there.
func bashCheck(t *testing.T, script string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Log("bash not on PATH: rendered user data not syntax-checked")
		return
	}
	f := filepath.Join(t.TempDir(), "user-data.sh")
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", f).CombinedOutput(); err != nil {
		t.Errorf("bash -n on rendered user data: %v\n%s", err, out)
	}
}

// --- the checkers catch what they claim to catch ------------------------------------------------

func TestCheckersFindBrokenWiring(t *testing.T) {
	c := mustParse(t, `
variable "used" {
  type = string
}
variable "unused" {
  type = string
  validation {
    condition     = var.unused != ""
    error_message = "x"
  }
}
locals {
  a      = var.used
  orphan = 1
}
resource "aws_s3_bucket" "data" {
  bucket = local.a
}
resource "aws_sqs_queue" "q" {
  name = var.missing
  tags = { b = aws_s3_bucket.data.arn, c = aws_s3_bucket.nope.arn, d = local.nolocal }
  policy = data.aws_iam_policy_document.nodoc.json
  lifecycle {
    ignore_changes = [name]
  }
}
data "aws_iam_policy_document" "d" {
  dynamic "statement" {
    for_each = [1]
    content {
      resources = [statement.value, module.nomod.x]
    }
  }
}
`)
	got := strings.Join(c.checkReferences(), "\n")
	for _, want := range []string{
		"var.missing: undeclared variable",
		"aws_s3_bucket.nope.arn: undeclared resource",
		"local.nolocal: undeclared local",
		"data.aws_iam_policy_document.nodoc.json: undeclared data source",
		"module.nomod.x: undeclared module",
		`variable "unused" is never used`,
		`local "orphan" is never used`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("checkReferences missed %q; got:\n%s", want, got)
		}
	}
	for _, wrong := range []string{"statement.value", "var.used", `"used" is never`, "ignore", ": name"} {
		if strings.Contains(got, wrong) {
			t.Errorf("checkReferences wrongly reported %q; got:\n%s", wrong, got)
		}
	}
}

func TestCheckersFindBrokenModuleCall(t *testing.T) {
	dir := t.TempDir()
	child := filepath.Join(dir, "child")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(child, "main.tf"), []byte(`
variable "required" {
  type = string
}
variable "optional" {
  type    = string
  default = "x"
}
output "out" {
  value = "${var.required}${var.optional}"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := parseConfig(dir, map[string][]byte{"main.tf": []byte(`
module "c" {
  source   = "./child"
  optional = "y"
  typo     = "z"
}
output "o" {
  value = [module.c.out, module.c.nothing]
}
`)})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(append(root.checkModuleCalls(), root.checkReferences()...), "\n")
	for _, want := range []string{
		`module "c" misses required variable "required"`,
		`module "c" has no variable "typo"`,
		`module "c" has no output "nothing"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missed %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"optional"`) || strings.Contains(got, `"out"`) {
		t.Errorf("reported a correct argument or output; got:\n%s", got)
	}
}

// TestReadmeTables checks that the module's README lists every variable and output in its
// tables, and nothing that is not one.
func TestReadmeTables(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(modulePath(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := loadDir(t, modulePath(t))
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `") {
			name := strings.TrimPrefix(line, "| `")
			if i := strings.Index(name, "`"); i > 0 {
				listed[name[:i]] = true
			}
		}
	}
	for name := range c.variables {
		if !listed[name] {
			t.Errorf("README.md does not list variable %q", name)
		}
	}
	for name := range c.outputs {
		if !listed[name] {
			t.Errorf("README.md does not list output %q", name)
		}
	}
	for name := range listed {
		_, v := c.variables[name]
		_, o := c.outputs[name]
		if !v && !o && !strings.HasPrefix(name, "LOAM_") {
			t.Errorf("README.md lists %q, which is neither a variable nor an output", name)
		}
	}
}

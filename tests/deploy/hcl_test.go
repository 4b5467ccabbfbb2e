package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// repoRoot is the repository root, found from this file's location.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// config is one Terraform module directory: its top-level declarations by address.
type config struct {
	dir       string
	bodies    map[string]*hclsyntax.Body // file name → body
	variables map[string]*hclsyntax.Block
	locals    map[string]*hclsyntax.Attribute
	outputs   map[string]*hclsyntax.Block
	resources map[string]*hclsyntax.Block // "aws_s3_bucket.data"
	data      map[string]*hclsyntax.Block // "aws_iam_policy_document.bucket"
	modules   map[string]*hclsyntax.Block
	other     []*hclsyntax.Block // terraform, provider, check, moved, import
}

// loadDir parses every .tf file of dir (not its subdirectories).
func loadDir(t testing.TB, dir string) *config {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("no .tf files in %s", dir)
	}
	files := map[string][]byte{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(name)] = b
	}
	c, err := parseConfig(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parseConfig parses files (name → content) as one module.
func parseConfig(dir string, files map[string][]byte) (*config, error) {
	c := &config{
		dir:       dir,
		bodies:    map[string]*hclsyntax.Body{},
		variables: map[string]*hclsyntax.Block{},
		locals:    map[string]*hclsyntax.Attribute{},
		outputs:   map[string]*hclsyntax.Block{},
		resources: map[string]*hclsyntax.Block{},
		data:      map[string]*hclsyntax.Block{},
		modules:   map[string]*hclsyntax.Block{},
	}
	p := hclparse.NewParser()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []string
	dup := func(kind, key string, b *hclsyntax.Block) {
		errs = append(errs, fmt.Sprintf("%s: duplicate %s %q", b.DefRange(), kind, key))
	}
	for _, name := range names {
		f, diags := p.ParseHCL(files[name], filepath.Join(dir, name))
		if diags.HasErrors() {
			return nil, fmt.Errorf("parse %s: %s", name, diags.Error())
		}
		body := f.Body.(*hclsyntax.Body)
		c.bodies[name] = body
		if len(body.Attributes) > 0 {
			for n, a := range body.Attributes {
				errs = append(errs, fmt.Sprintf("%s: top-level attribute %q", a.SrcRange, n))
			}
		}
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable", "output", "module":
				if len(b.Labels) != 1 {
					errs = append(errs, fmt.Sprintf("%s: %s block needs one label", b.DefRange(), b.Type))
					continue
				}
				m := map[string]map[string]*hclsyntax.Block{"variable": c.variables, "output": c.outputs, "module": c.modules}[b.Type]
				if _, ok := m[b.Labels[0]]; ok {
					dup(b.Type, b.Labels[0], b)
				}
				m[b.Labels[0]] = b
			case "resource", "data":
				if len(b.Labels) != 2 {
					errs = append(errs, fmt.Sprintf("%s: %s block needs two labels", b.DefRange(), b.Type))
					continue
				}
				m := c.resources
				if b.Type == "data" {
					m = c.data
				}
				key := b.Labels[0] + "." + b.Labels[1]
				if _, ok := m[key]; ok {
					dup(b.Type, key, b)
				}
				m[key] = b
			case "locals":
				for n, a := range b.Body.Attributes {
					if _, ok := c.locals[n]; ok {
						errs = append(errs, fmt.Sprintf("%s: duplicate local %q", a.SrcRange, n))
					}
					c.locals[n] = a
				}
			case "terraform", "provider", "check", "moved", "import", "removed":
				c.other = append(c.other, b)
			default:
				errs = append(errs, fmt.Sprintf("%s: unknown top-level block %q", b.DefRange(), b.Type))
			}
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return c, nil
}

// mustParse parses one in-memory file for the checkers' self-tests.
func mustParse(t testing.TB, src string) *config {
	t.Helper()
	c, err := parseConfig("mem", map[string][]byte{"main.tf": []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tfDirs lists every directory under root holding .tf files, skipping .terraform.
func tfDirs(t testing.TB, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".terraform" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".tf") {
			seen[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// --- references ------------------------------------------------------------------------------

// ref is one traversal found in an expression, with the top-level block it sits in.
type ref struct {
	trav  hcl.Traversal
	owner string // "variable.x", "resource.aws_s3_bucket.data", "locals", "output.y", ...
}

func (r ref) String() string {
	return fmt.Sprintf("%s: %s", r.trav.SourceRange(), traversalString(r.trav))
}

// traversalString renders a.b.c (index steps as [..]).
func traversalString(tr hcl.Traversal) string {
	var sb strings.Builder
	for i, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			sb.WriteString(s.Name)
		case hcl.TraverseAttr:
			sb.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			sb.WriteString("[" + s.Key.GoString() + "]")
		case hcl.TraverseSplat:
			sb.WriteString("[*]")
		default:
			if i > 0 {
				sb.WriteString(".?")
			}
		}
	}
	return sb.String()
}

// stepName is the attribute name of step i of tr, or "" when it is not an attribute step.
func stepName(tr hcl.Traversal, i int) string {
	if i >= len(tr) {
		return ""
	}
	switch s := tr[i].(type) {
	case hcl.TraverseRoot:
		return s.Name
	case hcl.TraverseAttr:
		return s.Name
	}
	return ""
}

// blockOwner names a top-level block.
func blockOwner(b *hclsyntax.Block) string {
	return strings.Join(append([]string{b.Type}, b.Labels...), ".")
}

// refs returns every traversal in the module's expressions. Names a dynamic block's iterator
// introduces are left out inside that block's content.
func (c *config) refs() []ref {
	var out []ref
	for _, name := range sortedKeys(c.bodies) {
		for _, b := range c.bodies[name].Blocks {
			if b.Type == "moved" {
				// from and to are resource addresses, not references.
				continue
			}
			owner := blockOwner(b)
			if b.Type == "locals" {
				owner = "locals"
			}
			body := b.Body
			if b.Type == "variable" {
				// A variable's type is a type constraint (string, map(string)), not references.
				shallow := *body
				shallow.Attributes = hclsyntax.Attributes{}
				for n, a := range body.Attributes {
					if n != "type" {
						shallow.Attributes[n] = a
					}
				}
				body = &shallow
			}
			out = append(out, bodyRefs(body, owner, nil)...)
		}
	}
	return out
}

func bodyRefs(body *hclsyntax.Body, owner string, iterators map[string]bool) []ref {
	var out []ref
	add := func(e hclsyntax.Expression, its map[string]bool) {
		for _, tr := range e.Variables() {
			if its[tr.RootName()] {
				continue
			}
			out = append(out, ref{trav: tr, owner: owner})
		}
	}
	for _, name := range sortedKeys(body.Attributes) {
		a := body.Attributes[name]
		// ignore_changes names attributes of its own resource, not references.
		if name == "ignore_changes" {
			continue
		}
		add(a.Expr, iterators)
	}
	for _, b := range body.Blocks {
		if b.Type == "dynamic" && len(b.Labels) == 1 {
			iter := b.Labels[0]
			if a, ok := b.Body.Attributes["iterator"]; ok {
				if kw := hcl.ExprAsKeyword(a.Expr); kw != "" {
					iter = kw
				}
			}
			inner := map[string]bool{iter: true}
			for k := range iterators {
				inner[k] = true
			}
			for _, name := range sortedKeys(b.Body.Attributes) {
				if name == "iterator" {
					continue
				}
				add(b.Body.Attributes[name].Expr, iterators)
			}
			for _, cb := range b.Body.Blocks {
				out = append(out, bodyRefs(cb.Body, owner, inner)...)
			}
			continue
		}
		out = append(out, bodyRefs(b.Body, owner, iterators)...)
	}
	return out
}

// Root names that need no declaration.
var builtinRoots = map[string]bool{"each": true, "count": true, "path": true, "self": true, "terraform": true}

// checkReferences reports every reference to something the module does not declare, and every
// variable or local nothing refers to. Outputs of local child modules are checked when the
// module's source is a local path.
func (c *config) checkReferences() []string {
	var problems []string
	usedVars := map[string]bool{}
	usedLocals := map[string]bool{}
	childOutputs := map[string]map[string]bool{}
	for name, m := range c.modules {
		src := stringAttr(m.Body, "source")
		if strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") {
			if child, err := loadDirErr(filepath.Join(c.dir, src)); err == nil {
				childOutputs[name] = map[string]bool{}
				for o := range child.outputs {
					childOutputs[name][o] = true
				}
			} else {
				problems = append(problems, fmt.Sprintf("module %q: cannot load %s: %v", name, src, err))
			}
		}
	}
	for _, r := range c.refs() {
		root := r.trav.RootName()
		switch {
		case root == "var":
			n := stepName(r.trav, 1)
			if _, ok := c.variables[n]; !ok {
				problems = append(problems, fmt.Sprintf("%s: undeclared variable", r))
			}
			if !strings.HasPrefix(r.owner, "variable.") {
				usedVars[n] = true
			}
		case root == "local":
			n := stepName(r.trav, 1)
			if _, ok := c.locals[n]; !ok {
				problems = append(problems, fmt.Sprintf("%s: undeclared local", r))
			}
			usedLocals[n] = true
		case root == "module":
			n := stepName(r.trav, 1)
			if _, ok := c.modules[n]; !ok {
				problems = append(problems, fmt.Sprintf("%s: undeclared module", r))
				continue
			}
			if outs, ok := childOutputs[n]; ok {
				if o := stepName(r.trav, 2); o != "" && !outs[o] {
					problems = append(problems, fmt.Sprintf("%s: module %q has no output %q", r, n, o))
				}
			}
		case root == "data":
			key := stepName(r.trav, 1) + "." + stepName(r.trav, 2)
			if _, ok := c.data[key]; !ok {
				problems = append(problems, fmt.Sprintf("%s: undeclared data source", r))
			}
		case builtinRoots[root]:
		default:
			key := root + "." + stepName(r.trav, 1)
			if _, ok := c.resources[key]; !ok {
				problems = append(problems, fmt.Sprintf("%s: undeclared resource", r))
			}
		}
	}
	for _, n := range sortedKeys(c.variables) {
		if !usedVars[n] {
			problems = append(problems, fmt.Sprintf("%s: variable %q is never used", c.variables[n].DefRange(), n))
		}
	}
	for _, n := range sortedKeys(c.locals) {
		if !usedLocals[n] {
			problems = append(problems, fmt.Sprintf("%s: local %q is never used", c.locals[n].SrcRange, n))
		}
	}
	sort.Strings(problems)
	return problems
}

func loadDirErr(dir string) (*config, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no .tf files in %s", dir)
	}
	files := map[string][]byte{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		files[filepath.Base(name)] = b
	}
	return parseConfig(dir, files)
}

// Module block arguments that are not input variables.
var moduleMetaArgs = map[string]bool{"source": true, "version": true, "providers": true, "depends_on": true, "count": true, "for_each": true}

// checkModuleCalls checks every call of a local child module: each required variable (no
// default) is passed, and nothing undeclared is.
func (c *config) checkModuleCalls() []string {
	var problems []string
	for _, name := range sortedKeys(c.modules) {
		m := c.modules[name]
		src := stringAttr(m.Body, "source")
		if !strings.HasPrefix(src, "./") && !strings.HasPrefix(src, "../") {
			continue
		}
		child, err := loadDirErr(filepath.Join(c.dir, src))
		if err != nil {
			problems = append(problems, fmt.Sprintf("module %q: %v", name, err))
			continue
		}
		for arg, a := range m.Body.Attributes {
			if moduleMetaArgs[arg] {
				continue
			}
			if _, ok := child.variables[arg]; !ok {
				problems = append(problems, fmt.Sprintf("%s: module %q has no variable %q", a.SrcRange, name, arg))
			}
		}
		for _, v := range sortedKeys(child.variables) {
			if _, hasDefault := child.variables[v].Body.Attributes["default"]; hasDefault {
				continue
			}
			if _, ok := m.Body.Attributes[v]; !ok {
				problems = append(problems, fmt.Sprintf("%s: module %q misses required variable %q", m.DefRange(), name, v))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// --- expression helpers -------------------------------------------------------------------------

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// literal evaluates e without variables or functions; ok is false when it needs either.
func literal(e hcl.Expression) (cty.Value, bool) {
	v, diags := e.Value(nil)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return v, true
}

// stringAttr is the literal string value of body's attribute name, or "".
func stringAttr(body *hclsyntax.Body, name string) string {
	a, ok := body.Attributes[name]
	if !ok {
		return ""
	}
	v, ok := literal(a.Expr)
	if !ok || v.IsNull() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

// stringList is the literal list of strings in e (a tuple of string literals); ok is false when
// any element is not a literal string.
func stringList(e hcl.Expression) ([]string, bool) {
	v, ok := literal(e)
	if !ok || v.IsNull() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		return nil, false
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		if el.Type() != cty.String {
			return nil, false
		}
		out = append(out, el.AsString())
	}
	return out, true
}

// blocksOf returns body's nested blocks of type typ, including the content of dynamic blocks
// of that type.
func blocksOf(body *hclsyntax.Body, typ string) []*hclsyntax.Body {
	var out []*hclsyntax.Body
	for _, b := range body.Blocks {
		switch {
		case b.Type == typ:
			out = append(out, b.Body)
		case b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == typ:
			for _, cb := range b.Body.Blocks {
				if cb.Type == "content" {
					out = append(out, cb.Body)
				}
			}
		}
	}
	return out
}

// refersTo reports whether e mentions a traversal starting with prefix (like
// "aws_s3_bucket.data" or "local.rpc_port"), following local values transitively.
func (c *config) refersTo(e hcl.Expression, prefix string) bool {
	return c.refersToSeen(e, prefix, map[string]bool{})
}

func (c *config) refersToSeen(e hcl.Expression, prefix string, seen map[string]bool) bool {
	for _, tr := range e.Variables() {
		s := traversalString(tr)
		if s == prefix || strings.HasPrefix(s, prefix+".") || strings.HasPrefix(s, prefix+"[") {
			return true
		}
		if tr.RootName() == "local" {
			n := stepName(tr, 1)
			if seen[n] {
				continue
			}
			seen[n] = true
			if a, ok := c.locals[n]; ok && c.refersToSeen(a.Expr, prefix, seen) {
				return true
			}
		}
	}
	return false
}

// refersDirectly is refersTo without following locals.
func refersDirectly(e hcl.Expression, prefix string) bool {
	for _, tr := range e.Variables() {
		s := traversalString(tr)
		if s == prefix || strings.HasPrefix(s, prefix+".") || strings.HasPrefix(s, prefix+"[") {
			return true
		}
	}
	return false
}

// evalContext holds every local whose value is a constant (possibly built from other constant
// locals), so that expressions like local.http_port evaluate.
func (c *config) evalContext() *hcl.EvalContext {
	known := map[string]cty.Value{}
	for progress := true; progress; {
		progress = false
		ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"local": cty.ObjectVal(known)}}
		for _, n := range sortedKeys(c.locals) {
			if _, ok := known[n]; ok {
				continue
			}
			v, diags := c.locals[n].Expr.Value(ctx)
			if diags.HasErrors() || !v.IsWhollyKnown() {
				continue
			}
			known[n] = v
			progress = true
		}
	}
	return &hcl.EvalContext{Variables: map[string]cty.Value{"local": cty.ObjectVal(known)}}
}

// number evaluates e against the constant locals.
func (c *config) number(e hcl.Expression) (int64, bool) {
	v, diags := e.Value(c.evalContext())
	if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() || v.Type() != cty.Number {
		return 0, false
	}
	n, acc := v.AsBigFloat().Int64()
	return n, acc == 0
}

// visit calls fn on every node of e and, the first time they are referenced, of the local
// values e mentions (transitively).
func (c *config) visit(e hclsyntax.Expression, fn func(hclsyntax.Node)) {
	seen := map[string]bool{}
	var walk func(e hclsyntax.Expression)
	walk = func(e hclsyntax.Expression) {
		hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
			fn(n)
			if x, ok := n.(*hclsyntax.ScopeTraversalExpr); ok && x.Traversal.RootName() == "local" {
				name := stepName(x.Traversal, 1)
				if a, ok := c.locals[name]; ok && !seen[name] {
					seen[name] = true
					walk(a.Expr)
				}
			}
			return nil
		})
	}
	walk(e)
}

// objectItems collects the items of every object constructor inside e, following local values:
// key (a literal) → value expressions. Items whose key is not a literal are skipped.
func (c *config) objectItems(e hclsyntax.Expression) map[string][]hclsyntax.Expression {
	out := map[string][]hclsyntax.Expression{}
	c.visit(e, func(n hclsyntax.Node) {
		obj, ok := n.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return
		}
		for _, item := range obj.Items {
			k, diags := item.KeyExpr.Value(nil)
			if diags.HasErrors() || k.IsNull() || !k.IsKnown() || k.Type() != cty.String {
				continue
			}
			out[k.AsString()] = append(out[k.AsString()], item.ValueExpr)
		}
	})
	return out
}

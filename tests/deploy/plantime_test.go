package deploy

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// knownAtPlan evaluates every count and for_each of the module with vars (some of whose
// values may be unknown, as a resource created in the same apply makes them) and reports the
// blocks whose instance count Terraform could not know at plan time ("Invalid count
// argument", "Invalid for_each argument").
func knownAtPlan(t *testing.T, c *config, vars map[string]cty.Value) []string {
	t.Helper()
	e := evaluateLocals(t, c, vars, false)
	// evaluateLocals keeps only wholly known locals; give the others their (partly unknown)
	// values, so a count that depends on one comes out unknown rather than failing.
	for progress := true; progress; {
		progress = false
		e.ctx.Variables["local"] = cty.ObjectVal(e.locals)
		for _, n := range sortedKeys(c.locals) {
			if _, ok := e.locals[n]; ok {
				continue
			}
			v, diags := c.locals[n].Expr.Value(e.ctx)
			if diags.HasErrors() {
				continue
			}
			e.locals[n] = v
			progress = true
		}
	}
	e.ctx.Variables["local"] = cty.ObjectVal(e.locals)
	// Resources the mock does not know: their attributes are unknown until apply, but
	// Terraform knows their instance keys (from their own count or for_each).
	mocked := mock()
	for pass := 0; pass < 3; pass++ {
		byType := map[string]map[string]cty.Value{}
		for _, key := range sortedKeys(c.resources) {
			typ, name, _ := strings.Cut(key, ".")
			if _, ok := mocked[typ]; ok {
				continue
			}
			if byType[typ] == nil {
				byType[typ] = map[string]cty.Value{}
			}
			b := c.resources[key].Body
			inst := cty.DynamicVal
			if a, ok := b.Attributes["for_each"]; ok {
				if v, diags := a.Expr.Value(e.ctx); !diags.HasErrors() && v.IsKnown() && !v.IsNull() {
					m := map[string]cty.Value{}
					for it := v.ElementIterator(); it.Next(); {
						k, _ := it.Element()
						if k.IsKnown() && k.Type() == cty.String {
							m[k.AsString()] = cty.DynamicVal
						}
					}
					inst = cty.ObjectVal(m)
				}
			} else if a, ok := b.Attributes["count"]; ok {
				if v, diags := a.Expr.Value(e.ctx); !diags.HasErrors() && v.IsKnown() {
					n, _ := v.AsBigFloat().Int64()
					elems := make([]cty.Value, n)
					for i := range elems {
						elems[i] = cty.DynamicVal
					}
					inst = cty.TupleVal(elems)
				}
			}
			byType[typ][name] = inst
		}
		for typ, m := range byType {
			e.ctx.Variables[typ] = cty.ObjectVal(m)
		}
	}
	var problems []string
	check := func(kind string, blocks map[string]*hclsyntax.Block) {
		for _, name := range sortedKeys(blocks) {
			for _, arg := range []string{"count", "for_each"} {
				a, ok := blocks[name].Body.Attributes[arg]
				if !ok {
					continue
				}
				v, diags := a.Expr.Value(e.ctx)
				switch {
				case diags.HasErrors():
					problems = append(problems, kind+name+"."+arg+": "+diags.Error())
				case arg == "count" && !v.IsKnown(), arg == "for_each" && !forEachKeysKnown(v):
					problems = append(problems, kind+name+"."+arg+" is not known at plan time")
				}
			}
		}
	}
	check("", c.resources)
	check("data.", c.data)
	return problems
}

// forEachKeysKnown: Terraform needs a for_each's keys (its elements, for a set) at plan time;
// a map's values may be unknown.
func forEachKeysKnown(v cty.Value) bool {
	if !v.IsKnown() {
		return false
	}
	if v.IsNull() {
		return true
	}
	ty := v.Type()
	if ty.IsSetType() {
		return v.IsWhollyKnown()
	}
	return true
}

// TestCountsKnownWhenInputsAreCreatedInTheSameApply: a root that creates the VPC, the
// subnets, the identity secret, the route tables or a KMS key in the same apply passes their
// IDs and ARNs to the module unknown at plan time; every count and for_each must still be
// known then.
func TestCountsKnownWhenInputsAreCreatedInTheSameApply(t *testing.T) {
	c := loadDir(t, modulePath(t))
	unknown := cty.UnknownVal(cty.String)
	vars := baseVars(3, ecrSequencer, ecrLognode)
	vars["vpc_id"] = unknown
	vars["subnet_ids"] = cty.MapVal(map[string]cty.Value{"eu-west-1a": unknown, "eu-west-1b": unknown, "eu-west-1c": unknown})
	vars["kms_key_arn"] = unknown
	vars["create_kms_key"] = cty.False // the documented way with a key created beside the module
	vars["vpc_endpoint_route_table_ids"] = cty.ListVal([]cty.Value{unknown})
	vars["client_security_group_ids"] = cty.ListVal([]cty.Value{cty.StringVal("sg-0123456789abcdef0")})
	for name, v := range identityUnknown() {
		vars[name] = v
	}
	for _, p := range knownAtPlan(t, c, vars) {
		t.Error(p)
	}
}

// identityUnknown sets the cluster identity to a secret created in the same apply.
func identityUnknown() map[string]cty.Value {
	return map[string]cty.Value{"cluster_identity": cty.ObjectVal(map[string]cty.Value{
		"secret_arn": cty.UnknownVal(cty.String), "server_name": cty.StringVal("sequencer.loam")})}
}

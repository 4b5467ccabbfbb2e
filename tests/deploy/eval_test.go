package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// The tests below evaluate the module the way terraform plan would, with the data sources and
// resource attributes it cannot know here replaced by fixed values (mock below): what the log
// nodes' environment, the container definition and each voter's user data come out as.

// functions are the Terraform functions the module's locals and arguments use.
var functions = map[string]function.Function{
	"alltrue":    allTrueFunc,
	"can":        tryfunc.CanFunc,
	"cidrhost":   cidrHostFunc,
	"floor":      stdlib.FloorFunc,
	"concat":     stdlib.ConcatFunc,
	"contains":   stdlib.ContainsFunc,
	"distinct":   stdlib.DistinctFunc,
	"join":       stdlib.JoinFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
	"keys":       stdlib.KeysFunc,
	"length":     lengthFunc,
	"lookup":     stdlib.LookupFunc,
	"merge":      stdlib.MergeFunc,
	"regex":      stdlib.RegexFunc,
	"replace":    stdlib.ReplaceFunc,
	"setproduct": stdlib.SetProductFunc,
	"slice":      stdlib.SliceFunc,
	"sort":       stdlib.SortFunc,
	"split":      stdlib.SplitFunc,
	"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"trimspace":  stdlib.TrimSpaceFunc,
	"try":        tryfunc.TryFunc,
	"values":     stdlib.ValuesFunc,
}

// lengthFunc is Terraform's length: of a string (in characters) or of a collection.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if args[0].Type() == cty.String {
			return stdlib.Strlen(args[0])
		}
		return stdlib.Length(args[0])
	},
})

// allTrueFunc is Terraform's alltrue (not in cty's stdlib).
var allTrueFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			_, v := it.Element()
			if v.IsNull() || v.False() {
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

// cidrHostFunc is Terraform's cidrhost for IPv4 (enough for the validations here).
var cidrHostFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}, {Name: "hostnum", Type: cty.Number}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		_, n, err := net.ParseCIDR(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		host, _ := args[1].AsBigFloat().Int64()
		ip := n.IP.To4()
		if ip == nil {
			return cty.NilVal, fmt.Errorf("cidrhost: only IPv4 here")
		}
		ones, bits := n.Mask.Size()
		if host < 0 || host >= 1<<(bits-ones) {
			return cty.NilVal, fmt.Errorf("cidrhost: host number %d out of range", host)
		}
		v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
		v += uint32(host)
		return cty.StringVal(fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&0xff, v>>8&0xff, v&0xff)), nil
	},
})

var (
	zoneIPs = map[string]string{"eu-west-1a": "10.0.1.10", "eu-west-1b": "10.0.2.10", "eu-west-1c": "10.0.3.10"}
	voterIP = map[string]string{"seq-1": "10.0.1.10", "seq-2": "10.0.2.10", "seq-3": "10.0.3.10", "seq-4": "10.0.4.10", "seq-5": "10.0.5.10"}
)

const (
	ecrSequencer = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/loam/sequencer:v0.1.0"
	ecrLognode   = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/loam/lognode:v0.1.0"
)

// mock is what plan would know after the data sources and resources exist.
func mock() map[string]cty.Value {
	obj := func(kv ...string) cty.Value {
		m := map[string]cty.Value{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = cty.StringVal(kv[i+1])
		}
		return cty.ObjectVal(m)
	}
	enis, vols := map[string]cty.Value{}, map[string]cty.Value{}
	for id, ip := range voterIP {
		enis[id] = obj("id", "eni-"+id, "private_ip", ip)
		vols[id] = obj("id", "vol-0"+strings.Repeat(id[4:], 16))
	}
	return map[string]cty.Value{
		"data": cty.ObjectVal(map[string]cty.Value{
			"aws_region":          cty.ObjectVal(map[string]cty.Value{"current": obj("region", "eu-west-1")}),
			"aws_caller_identity": cty.ObjectVal(map[string]cty.Value{"current": obj("account_id", "123456789012")}),
			"aws_partition":       cty.ObjectVal(map[string]cty.Value{"current": obj("partition", "aws")}),
			"aws_vpc":             cty.ObjectVal(map[string]cty.Value{"this": obj("cidr_block", "10.0.0.0/16")}),
			"aws_ssm_parameter":   cty.ObjectVal(map[string]cty.Value{"al2023": cty.TupleVal([]cty.Value{obj("insecure_value", "ami-0123456789abcdef0")})}),
			"aws_route_tables": cty.ObjectVal(map[string]cty.Value{"vpc": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
				"ids": cty.ListVal([]cty.Value{cty.StringVal("rtb-0a1b2c3d4e5f60718")})})})}),
		}),
		"aws_s3_bucket":            cty.ObjectVal(map[string]cty.Value{"data": obj("bucket", "loam-data-x1", "id", "loam-data-x1", "arn", "arn:aws:s3:::loam-data-x1")}),
		"aws_dynamodb_table":       cty.ObjectVal(map[string]cty.Value{"coord": obj("name", "loam-coord", "arn", "arn:aws:dynamodb:eu-west-1:123456789012:table/loam-coord")}),
		"aws_cloudwatch_log_group": cty.ObjectVal(map[string]cty.Value{"sequencer": obj("name", "/loam/loam/sequencer"), "lognode": obj("name", "/loam/loam/lognode")}),
		"aws_network_interface":    cty.ObjectVal(map[string]cty.Value{"sequencer": cty.ObjectVal(enis)}),
		"aws_ebs_volume":           cty.ObjectVal(map[string]cty.Value{"sequencer": cty.ObjectVal(vols)}),
		"aws_lb":                   cty.ObjectVal(map[string]cty.Value{"lognode": obj("dns_name", "loam-lognode-0123456789.elb.eu-west-1.amazonaws.com", "arn", "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/loam-lognode/0123456789abcdef")}),
		"aws_kms_key":              cty.ObjectVal(map[string]cty.Value{"data": cty.TupleVal([]cty.Value{obj("arn", "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab", "key_id", "1234abcd-12ab-34cd-56ef-1234567890ab")})}),
	}
}

// evaluated is the module evaluated against mock() and a set of input variables.
type evaluated struct {
	c      *config
	ctx    *hcl.EvalContext
	locals map[string]cty.Value
}

// evaluate sets the module's variables (defaults overridden by vars), then evaluates every local
// it can, repeatedly, until no more become known.
func evaluate(t *testing.T, c *config, vars map[string]cty.Value) *evaluated {
	t.Helper()
	return evaluateLocals(t, c, vars, true)
}

// evaluateLocals is evaluate; with strict false, locals that cannot be evaluated (invalid
// inputs make some fail, as they would in terraform) are left out silently.
func evaluateLocals(t *testing.T, c *config, vars map[string]cty.Value, strict bool) *evaluated {
	t.Helper()
	var err error
	vv := map[string]cty.Value{}
	for name, v := range c.variables {
		if d, ok := v.Body.Attributes["default"]; ok {
			val, diags := d.Expr.Value(nil)
			if diags.HasErrors() {
				t.Fatalf("variable %s default: %s", name, diags.Error())
			}
			vv[name] = val
		}
	}
	for k, v := range vars {
		if _, ok := c.variables[k]; !ok {
			t.Fatalf("test sets undeclared variable %q", k)
		}
		vv[k] = v
	}
	for name, v := range c.variables {
		val, ok := vv[name]
		if !ok {
			t.Fatalf("test does not set required variable %q", name)
		}
		// Terraform converts every value to the variable's type first.
		ty, diags := typeexpr.TypeConstraint(v.Body.Attributes["type"].Expr)
		if diags.HasErrors() {
			t.Fatalf("variable %s type: %s", name, diags.Error())
		}
		if val.IsNull() {
			vv[name] = cty.NullVal(ty)
			continue
		}
		if vv[name], err = convert.Convert(val, ty); err != nil {
			t.Fatalf("variable %s = %#v does not convert to its type: %v", name, val, err)
		}
	}
	ctx := &hcl.EvalContext{Variables: mock(), Functions: functions}
	ctx.Variables["var"] = cty.ObjectVal(vv)
	ctx.Variables["path"] = cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(c.dir)})
	locals := map[string]cty.Value{}
	for progress := true; progress; {
		progress = false
		ctx.Variables["local"] = cty.ObjectVal(locals)
		for _, n := range sortedKeys(c.locals) {
			if _, ok := locals[n]; ok {
				continue
			}
			v, diags := c.locals[n].Expr.Value(ctx)
			if diags.HasErrors() || !v.IsWhollyKnown() {
				continue
			}
			locals[n] = v
			progress = true
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	for _, n := range sortedKeys(c.locals) {
		if _, ok := locals[n]; !ok && strict {
			_, diags := c.locals[n].Expr.Value(ctx)
			t.Errorf("local.%s does not evaluate: %s", n, diags.Error())
		}
	}
	return &evaluated{c: c, ctx: ctx, locals: locals}
}

// with returns a child context where each.key and each.value are set.
func (e *evaluated) with(key string, value cty.Value) *hcl.EvalContext {
	child := e.ctx.NewChild()
	child.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(key), "value": value})}
	return child
}

func (e *evaluated) value(t *testing.T, expr hcl.Expression, ctx *hcl.EvalContext) cty.Value {
	t.Helper()
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", expr.Range(), diags.Error())
	}
	return v
}

func strs(v cty.Value) []string {
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		out = append(out, el.AsString())
	}
	return out
}

func stringMap(v cty.Value) map[string]string {
	out := map[string]string{}
	for it := v.ElementIterator(); it.Next(); {
		k, el := it.Element()
		out[k.AsString()] = el.AsString()
	}
	return out
}

func baseVars(voters int, seqImage, lnImage string) map[string]cty.Value {
	subnets := map[string]cty.Value{}
	for zone := range zoneIPs {
		subnets[zone] = cty.StringVal("subnet-0" + zone[len(zone)-1:] + "00000000000001")
	}
	return map[string]cty.Value{
		"vpc_id":           cty.StringVal("vpc-0123456789abcdef0"),
		"subnet_ids":       cty.MapVal(subnets),
		"sequencer_image":  cty.StringVal(seqImage),
		"lognode_image":    cty.StringVal(lnImage),
		"sequencer_voters": cty.NumberIntVal(int64(voters)),
		"functions_dir":    cty.StringVal("dist/functions"),
	}
}

// renderUserData evaluates each voter's templatefile() arguments and renders the template.
func (e *evaluated) renderUserData(t *testing.T) map[string]string {
	t.Helper()
	inst := e.c.resources["aws_instance.sequencer"]
	if inst == nil {
		t.Fatal("no aws_instance.sequencer")
	}
	var call *hclsyntax.FunctionCallExpr
	hclsyntax.VisitAll(inst.Body.Attributes["user_data"].Expr, func(n hclsyntax.Node) hcl.Diagnostics {
		if fc, ok := n.(*hclsyntax.FunctionCallExpr); ok && fc.Name == "templatefile" {
			call = fc
		}
		return nil
	})
	if call == nil || len(call.Args) != 2 {
		t.Fatal("aws_instance.sequencer user_data is not templatefile(path, vars)")
	}
	path := e.value(t, call.Args[0], e.ctx).AsString()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	out := map[string]string{}
	voters := e.locals["sequencer_voters"]
	for it := voters.ElementIterator(); it.Next(); {
		k, v := it.Element()
		args := e.value(t, call.Args[1], e.with(k.AsString(), v))
		rendered, diags := tmpl.Value(&hcl.EvalContext{Variables: args.AsValueMap(), Functions: functions})
		if diags.HasErrors() {
			t.Fatalf("render user data of %s: %s", k.AsString(), diags.Error())
		}
		out[k.AsString()] = rendered.AsString()
	}
	return out
}

func TestEvaluatedSequencer(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(3, ecrSequencer, ecrLognode))

	wantRPC := []string{"10.0.1.10:7070", "10.0.2.10:7070", "10.0.3.10:7070"}
	if got := strs(e.locals["sequencer_rpc_addresses"]); fmt.Sprint(got) != fmt.Sprint(wantRPC) {
		t.Errorf("sequencer RPC addresses %v, want %v", got, wantRPC)
	}
	// Voters sit in the first three zones, one each.
	zones := map[string]string{}
	for it := e.locals["sequencer_voters"].ElementIterator(); it.Next(); {
		k, v := it.Element()
		zones[k.AsString()] = v.GetAttr("zone").AsString()
	}
	if fmt.Sprint(zones) != "map[seq-1:eu-west-1a seq-2:eu-west-1b seq-3:eu-west-1c]" {
		t.Errorf("voter zones %v", zones)
	}

	scripts := e.renderUserData(t)
	if len(scripts) != 3 {
		t.Fatalf("rendered %d voters, want 3", len(scripts))
	}
	for id, script := range scripts {
		ip := voterIP[id]
		for _, want := range []string{
			"--id " + id + " ", "--data-dir /data", "--rpc-addr " + ip + ":7070", "--raft-addr " + ip + ":7071",
			"--network host", "/var/lib/loam:/data", "--user 65532:65532", ecrSequencer,
			"awslogs-group=/loam/loam/sequencer", "awslogs-stream=" + id,
			"nvme-Amazon_Elastic_Block_Store_vol0" + strings.Repeat(id[4:], 16),
			"docker login --username AWS --password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com",
		} {
			if !strings.Contains(script, want) {
				t.Errorf("%s user data lacks %q", id, want)
			}
		}
		// Only seq-1 bootstraps, naming the other voters (never itself: sequencer-svc
		// rejects a repeated id).
		bootstrap := strings.Contains(script, "--bootstrap")
		if bootstrap != (id == "seq-1") {
			t.Errorf("%s bootstraps = %v", id, bootstrap)
		}
		if id == "seq-1" && !strings.Contains(script, "--bootstrap --peers seq-2=10.0.2.10:7071,seq-3=10.0.3.10:7071\n") {
			t.Errorf("seq-1 should bootstrap with --peers seq-2=10.0.2.10:7071,seq-3=10.0.3.10:7071")
		}
		if id != "seq-1" && strings.Contains(script, "--peers") {
			t.Errorf("%s gets --peers without --bootstrap", id)
		}
		bashCheck(t, script)
	}

	// The voters' images come from ECR: pull rights on exactly that repository.
	arns := stringMap(e.locals["ecr_repository_arns"])
	if arns["sequencer"] != "arn:aws:ecr:eu-west-1:123456789012:repository/loam/sequencer" ||
		arns["lognode"] != "arn:aws:ecr:eu-west-1:123456789012:repository/loam/lognode" {
		t.Errorf("ECR repository ARNs %v", arns)
	}
}

func TestEvaluatedSingleVoterAndPublicImages(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(1, "ghcr.io/loamhq/sequencer:v0.1.0", "ghcr.io/loamhq/lognode:v0.1.0"))
	if got := strs(e.locals["sequencer_rpc_addresses"]); fmt.Sprint(got) != "[10.0.1.10:7070]" {
		t.Errorf("one voter: RPC addresses %v", got)
	}
	scripts := e.renderUserData(t)
	s := scripts["seq-1"]
	if len(scripts) != 1 || !strings.Contains(s, "--raft-addr 10.0.1.10:7071 --bootstrap\n") {
		t.Errorf("a single voter bootstraps alone, without --peers:\n%s", s)
	}
	if strings.Contains(s, "ecr get-login-password") {
		t.Error("a non-ECR image gets an ECR login")
	}
	if n := e.locals["ecr_repository_arns"].LengthInt(); n != 0 {
		t.Errorf("non-ECR images got %d ECR repository grants", n)
	}
	bashCheck(t, s)
}

func TestEvaluatedLogNodeTask(t *testing.T) {
	c := loadDir(t, modulePath(t))
	vars := baseVars(3, ecrSequencer, ecrLognode)
	vars["lognode_extra_environment"] = cty.MapVal(map[string]cty.Value{
		"LOAM_BUCKET": cty.StringVal("s3://someone-elses-bucket"),
		"GOMAXPROCS":  cty.StringVal("2"),
	})
	e := evaluate(t, c, vars)
	td := c.resources["aws_ecs_task_definition.lognode"]
	if td == nil {
		t.Fatal("no aws_ecs_task_definition.lognode")
	}
	ctx := e.with("eu-west-1b", cty.StringVal("subnet-0b00000000000001"))
	raw := e.value(t, td.Body.Attributes["container_definitions"].Expr, ctx).AsString()
	var defs []struct {
		Name         string
		Image        string
		PortMappings []struct{ ContainerPort int }
		Environment  []struct{ Name, Value string }
		HealthCheck  struct{ Command []string }
		StopTimeout  int
	}
	if err := json.Unmarshal([]byte(raw), &defs); err != nil {
		t.Fatalf("container_definitions is not the JSON ECS expects: %v\n%s", err, raw)
	}
	if len(defs) != 1 {
		t.Fatalf("%d containers, want 1", len(defs))
	}
	d := defs[0]
	var ports []int
	for _, pm := range d.PortMappings {
		ports = append(ports, pm.ContainerPort)
	}
	sort.Ints(ports)
	if d.Image != ecrLognode || fmt.Sprint(ports) != fmt.Sprint(lognodePorts()) {
		t.Errorf("container image %s ports %v, want %v", d.Image, ports, lognodePorts())
	}
	env := map[string]string{}
	var names []string
	for _, kv := range d.Environment {
		env[kv.Name] = kv.Value
		names = append(names, kv.Name)
	}
	if !sortedStrings(names) {
		t.Errorf("environment not sorted by name (ECS sorts it; plan would never settle): %v", names)
	}
	for name, want := range map[string]string{
		"LOAM_ZONE":                      "eu-west-1b",
		"LOAM_HTTP_ADDR":                 "0.0.0.0:8080",
		"LOAM_GRPC_ADDR":                 "0.0.0.0:9090",
		"LOAM_KAFKA_ADDR":                "0.0.0.0:9092",
		"LOAM_KAFKA_ADVERTISED_LISTENER": "loam-lognode-0123456789.elb.eu-west-1.amazonaws.com:9092",
		"LOAM_OTLP_GRPC_ADDR":            "0.0.0.0:4317",
		"LOAM_OTLP_HTTP_ADDR":            "0.0.0.0:4318",
		"LOAM_BUCKET":                    "s3://loam-data-x1?region=eu-west-1",
		"LOAM_SEQUENCER":                 "10.0.1.10:7070,10.0.2.10:7070,10.0.3.10:7070",
		"LOAM_COORD_TABLE":               "loam-coord",
		"AWS_REGION":                     "eu-west-1",
		"GOMAXPROCS":                     "2",
	} {
		if env[name] != want {
			t.Errorf("%s = %q, want %q", name, env[name], want)
		}
	}
	if _, ok := env["LOAM_NODE_ID"]; ok {
		t.Error("LOAM_NODE_ID is fixed; every task needs its own (the hostname default)")
	}
	if fmt.Sprint(d.HealthCheck.Command) != "[CMD /usr/local/bin/loam-healthcheck http://127.0.0.1:8080/healthz]" {
		t.Errorf("container health check %v", d.HealthCheck.Command)
	}
	if d.StopTimeout < 70 || d.StopTimeout > 120 {
		t.Errorf("stopTimeout %d: lognode-svc drains for up to 70 s, Fargate allows 120", d.StopTimeout)
	}
	// The load balancer spans every zone's subnet.
	lb := c.resources["aws_lb.lognode"]
	if got := e.value(t, lb.Body.Attributes["subnets"].Expr, e.ctx); got.LengthInt() != len(zoneIPs) {
		t.Errorf("load balancer in %d subnets, want %d", got.LengthInt(), len(zoneIPs))
	}
}

func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] > s[i] {
			return false
		}
	}
	return true
}

// TestEvaluatedVariableValidations runs the module's validation conditions on good and bad
// values: a validation that accepts garbage or rejects the example's values is a bug.
func TestEvaluatedVariableValidations(t *testing.T) {
	c := loadDir(t, modulePath(t))
	good := baseVars(3, ecrSequencer, ecrLognode)
	check := func(name string, val cty.Value, wantOK bool) {
		t.Helper()
		vars := map[string]cty.Value{}
		for k, v := range good {
			vars[k] = v
		}
		vars[name] = val
		e := evaluateLocals(t, c, vars, false)
		ok := true
		for _, vb := range blocksOf(c.variables[name].Body, "validation") {
			v := e.value(t, vb.Attributes["condition"].Expr, e.ctx)
			if v.False() {
				ok = false
			}
		}
		if ok != wantOK {
			t.Errorf("%s = %#v: valid = %v, want %v", name, val, ok, wantOK)
		}
	}
	check("name", cty.StringVal("loam"), true)
	check("name", cty.StringVal("Loam_Prod"), false)
	check("name", cty.StringVal(strings.Repeat("a", 25)), false)
	check("vpc_id", cty.StringVal("vpc-0abc"), true)
	check("vpc_id", cty.StringVal("subnet-0abc"), false)
	check("subnet_ids", good["subnet_ids"], true)
	check("subnet_ids", cty.MapVal(map[string]cty.Value{"0": cty.StringVal("subnet-01")}), false)
	check("subnet_ids", cty.MapVal(map[string]cty.Value{"eu-west-1a": cty.StringVal("subnet-01"), "eu-west-1b": cty.StringVal("subnet-01")}), false)
	check("sequencer_voters", cty.NumberIntVal(2), false)
	check("sequencer_voters", cty.NumberIntVal(5), false) // only three zones
	check("sequencer_private_ips", cty.ListVal([]cty.Value{cty.StringVal("10.0.1.5"), cty.StringVal("10.0.2.5"), cty.StringVal("10.0.3.5")}), true)
	check("sequencer_private_ips", cty.ListVal([]cty.Value{cty.StringVal("10.0.1.5")}), false)
	check("lognode_count_per_zone", cty.NumberIntVal(0), false)
	check("lognode_cpu", cty.NumberIntVal(1000), false)
	check("client_cidr_blocks", cty.ListVal([]cty.Value{cty.StringVal("10.0.0.0/8")}), true)
	check("client_cidr_blocks", cty.ListVal([]cty.Value{cty.StringVal("10.0.0.0")}), false)
	check("bucket_sse_algorithm", cty.StringVal("aws:kms:dsse"), false)
	check("sequencer_image", cty.StringVal("repo/image:tag with space"), false)
	check("lognode_extra_environment", cty.MapVal(map[string]cty.Value{"1BAD": cty.StringVal("x")}), false)
	check("log_retention_days", cty.NumberIntVal(31), false)
}

// TestExampleValuesEvaluate evaluates the module with the example's tfvars, as the example
// root passes them, and checks every validation accepts them.
func TestExampleValuesEvaluate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(examplePath(t), "terraform.tfvars.example"))
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(b, "terraform.tfvars.example", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ex := loadDir(t, examplePath(t))
	exVars := map[string]cty.Value{}
	for name, v := range ex.variables {
		if d, ok := v.Body.Attributes["default"]; ok {
			exVars[name], _ = d.Expr.Value(nil)
		}
	}
	for name, a := range f.Body.(*hclsyntax.Body).Attributes {
		exVars[name], _ = a.Expr.Value(nil)
	}
	exCtx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(exVars)}}
	modVars := map[string]cty.Value{}
	for name, a := range ex.modules["loam"].Body.Attributes {
		if moduleMetaArgs[name] {
			continue
		}
		v, diags := a.Expr.Value(exCtx)
		if diags.HasErrors() {
			t.Fatalf("module argument %s: %s", name, diags.Error())
		}
		modVars[name] = v
	}
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, modVars)
	for _, name := range sortedKeys(c.variables) {
		for _, vb := range blocksOf(c.variables[name].Body, "validation") {
			if v := e.value(t, vb.Attributes["condition"].Expr, e.ctx); v.False() {
				t.Errorf("the example's %s fails validation: %s", name, stringAttr(vb, "error_message"))
			}
		}
	}
	if got := len(e.renderUserData(t)); got != 3 {
		t.Errorf("the example renders %d voters, want 3", got)
	}
}

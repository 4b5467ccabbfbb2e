package deploy

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// resourcesOf returns the keys of the module's resources of type typ, sorted.
func (c *config) resourcesOf(typ string) []string {
	var out []string
	for k := range c.resources {
		if strings.HasPrefix(k, typ+".") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// one returns the single resource of type typ, failing the test otherwise.
func one(t *testing.T, c *config, typ string) (string, *hclsyntax.Body) {
	t.Helper()
	keys := c.resourcesOf(typ)
	if len(keys) != 1 {
		t.Fatalf("want exactly one %s, have %v", typ, keys)
	}
	return keys[0], c.resources[keys[0]].Body
}

func attr(t *testing.T, body *hclsyntax.Body, name string) hclsyntax.Expression {
	t.Helper()
	a, ok := body.Attributes[name]
	if !ok {
		t.Fatalf("%s: no attribute %q", body.SrcRange, name)
	}
	return a.Expr
}

func boolAttr(body *hclsyntax.Body, name string) (bool, bool) {
	a, ok := body.Attributes[name]
	if !ok {
		return false, false
	}
	v, ok := literal(a.Expr)
	if !ok || v.IsNull() || v.Type() != cty.Bool {
		return false, false
	}
	return v.True(), true
}

// mustBlock returns the only nested block typ of body.
func mustBlock(t *testing.T, body *hclsyntax.Body, typ string) *hclsyntax.Body {
	t.Helper()
	bs := blocksOf(body, typ)
	if len(bs) != 1 {
		t.Fatalf("%s: want one %q block, have %d", body.SrcRange, typ, len(bs))
	}
	return bs[0]
}

func TestPorts(t *testing.T) {
	c := loadDir(t, modulePath(t))
	for name, want := range map[string]int64{"http_port": 8080, "rpc_port": 7070, "raft_port": 7071} {
		a, ok := c.locals[name]
		if !ok {
			t.Errorf("no local %q", name)
			continue
		}
		if got, ok := c.number(a.Expr); !ok || got != want {
			t.Errorf("local.%s = %d (constant %v), want %d", name, got, ok, want)
		}
	}

	// Ingress into the sequencer: 7070 and 7071 only, only from security groups of the cluster,
	// Raft (7071) only from the voters themselves.
	seqSG := "aws_security_group.sequencer"
	if _, ok := c.resources[seqSG]; !ok {
		t.Fatalf("no %s", seqSG)
	}
	clusterSGs := map[string]bool{}
	for _, k := range c.resourcesOf("aws_security_group") {
		clusterSGs[k] = true
	}
	ports := map[int64][]string{}
	for _, key := range c.resourcesOf("aws_vpc_security_group_ingress_rule") {
		r := c.resources[key].Body
		if !refersDirectly(attr(t, r, "security_group_id"), seqSG) {
			continue
		}
		from, ok1 := c.number(attr(t, r, "from_port"))
		to, ok2 := c.number(attr(t, r, "to_port"))
		if !ok1 || !ok2 || from != to {
			t.Errorf("%s: sequencer ingress must open one constant port, has %d-%d", key, from, to)
			continue
		}
		for _, open := range []string{"cidr_ipv4", "cidr_ipv6", "prefix_list_id"} {
			if _, ok := r.Attributes[open]; ok {
				t.Errorf("%s: sequencer ingress from %s: only cluster security groups may reach it", key, open)
			}
		}
		sources := c.sgSources(t, key)
		if len(sources) == 0 {
			t.Errorf("%s: sequencer ingress without a source security group", key)
		}
		for _, s := range sources {
			if !clusterSGs[s] {
				t.Errorf("%s: sequencer ingress from %s, not a cluster security group", key, s)
			}
			if from == 7071 && s != seqSG {
				t.Errorf("%s: Raft port open to %s; only voters may reach it", key, s)
			}
		}
		ports[from] = append(ports[from], sources...)
	}
	if len(ports[7071]) == 0 {
		t.Error("no ingress rule opens Raft (7071) between voters")
	}
	if !contains(ports[7070], "aws_security_group.lognode") || !contains(ports[7070], seqSG) {
		t.Errorf("sequencer RPC (7070) must be open to voters and log nodes; open to %v", ports[7070])
	}
	for p := range ports {
		if p != 7070 && p != 7071 {
			t.Errorf("sequencer ingress opens port %d", p)
		}
	}

	// The log node's ports: local.lognode_ports, every one a constant.
	want := lognodePorts()
	pm, ok := c.locals["lognode_ports"]
	if !ok {
		t.Fatal("no local lognode_ports")
	}
	lnPorts := map[string]int64{}
	for name, exprs := range c.objectItems(pm.Expr) {
		if n, ok := c.number(exprs[0]); ok {
			lnPorts[name] = n
		} else {
			t.Errorf("local.lognode_ports.%s is not a constant port", name)
		}
	}
	var have []int
	for _, p := range lnPorts {
		have = append(have, int(p))
	}
	sort.Ints(have)
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("local.lognode_ports %v, want %v", have, want)
	}

	// Ingress into the log nodes: only those ports, each rule one port of the map, or a port
	// of local.lognode_internal_ports (served to the other log nodes only: not on the load
	// balancer) opened to the log nodes' own security group.
	lnRules := 0
	for _, key := range c.resourcesOf("aws_vpc_security_group_ingress_rule") {
		r := c.resources[key].Body
		if !refersDirectly(attr(t, r, "security_group_id"), "aws_security_group.lognode") {
			continue
		}
		fromMap := func(name string) bool {
			e := attr(t, r, name)
			if refersDirectly(e, "each.value") {
				fe, ok := r.Attributes["for_each"]
				return ok && c.refersTo(fe.Expr, "local.lognode_ports")
			}
			return c.refersTo(e, "local.lognode_ports")
		}
		internal := func(name string) bool { return c.refersTo(attr(t, r, name), "local.lognode_internal_ports") }
		switch {
		case internal("from_port") && internal("to_port"):
			if !refersDirectly(attr(t, r, "referenced_security_group_id"), "aws_security_group.lognode") {
				t.Errorf("%s: an internal log node port is opened to more than the log nodes", key)
			}
		case !fromMap("from_port") || !fromMap("to_port"):
			t.Errorf("%s: log node ingress opens ports outside local.lognode_ports and local.lognode_internal_ports", key)
		}
		lnRules++
	}
	if lnRules == 0 {
		t.Error("no ingress rule opens the log nodes' ports")
	}

	// Load balancer: internal; a listener and a target group per port, every target group
	// health-checked on the HTTP API's /healthz.
	_, lb := one(t, c, "aws_lb")
	if internal, ok := boolAttr(lb, "internal"); !ok || !internal {
		t.Error("the load balancer must be internal")
	}
	for _, typ := range []string{"aws_lb_target_group", "aws_lb_listener"} {
		_, b := one(t, c, typ)
		if !c.refersTo(attr(t, b, "for_each"), "local.lognode_ports") || !refersDirectly(attr(t, b, "port"), "each.value") {
			t.Errorf("%s: want one per local.lognode_ports entry, on its port", typ)
		}
	}
	_, tg := one(t, c, "aws_lb_target_group")
	hc := mustBlock(t, tg, "health_check")
	if got := stringAttr(hc, "path"); got != "/healthz" {
		t.Errorf("target group health check path %q, want /healthz", got)
	}
	if got := stringAttr(hc, "protocol"); got != "HTTP" {
		t.Errorf("target group health check protocol %q, want HTTP", got)
	}
	if !c.refersTo(attr(t, hc, "port"), "local.http_port") {
		t.Error("target group health check must use the HTTP port (/healthz answers for the node)")
	}

	// The log node container maps every port, and its service registers every one.
	_, td := one(t, c, "aws_ecs_task_definition")
	items := c.objectItems(attr(t, td, "container_definitions"))
	if len(items["containerPort"]) != 1 || !c.refersTo(items["containerPort"][0], "local.lognode_ports") {
		t.Error("the log node container's containerPort must come from local.lognode_ports")
	}
	_, svc := one(t, c, "aws_ecs_service")
	var lbBlock *hclsyntax.Block
	for _, b := range svc.Blocks {
		if b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == "load_balancer" {
			lbBlock = b
		}
	}
	if lbBlock == nil || !c.refersTo(attr(t, lbBlock.Body, "for_each"), "local.lognode_ports") {
		t.Error("the log node service must register a load_balancer per local.lognode_ports entry")
	}

	// The voters' user data gets RPC on 7070 and Raft on 7071; the peer list is of Raft addresses.
	_, inst := one(t, c, "aws_instance")
	var args map[string][]hclsyntax.Expression
	hclsyntax.VisitAll(attr(t, inst, "user_data"), func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && call.Name == "templatefile" && len(call.Args) == 2 {
			args = c.objectItems(call.Args[1])
		}
		return nil
	})
	for name, port := range map[string]string{"rpc_addr": "local.rpc_port", "raft_addr": "local.raft_port", "peers": "local.raft_port"} {
		if len(args[name]) != 1 || !c.refersTo(args[name][0], port) {
			t.Errorf("user data %s does not use %s", name, port)
		}
	}
}

// sgSources is the set of security groups a rule's referenced_security_group_id names,
// expanding each.value over a literal for_each object.
func (c *config) sgSources(t *testing.T, key string) []string {
	t.Helper()
	r := c.resources[key].Body
	a, ok := r.Attributes["referenced_security_group_id"]
	if !ok {
		return nil
	}
	exprs := []hclsyntax.Expression{a.Expr}
	if refersDirectly(a.Expr, "each.value") {
		fe, ok := r.Attributes["for_each"].Expr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			t.Errorf("%s: referenced_security_group_id = each.value needs a literal for_each object", key)
			return nil
		}
		exprs = nil
		for _, item := range fe.Items {
			exprs = append(exprs, item.ValueExpr)
		}
	}
	var out []string
	for _, e := range exprs {
		for _, tr := range e.Variables() {
			if tr.RootName() == "aws_security_group" {
				out = append(out, "aws_security_group."+stepName(tr, 1))
			} else {
				out = append(out, traversalString(tr))
			}
		}
	}
	sort.Strings(out)
	return out
}

// lognodePorts is every port a log node serves, sorted: OTLP/gRPC 4317, OTLP/HTTP 4318,
// HTTP 8080, gRPC 9090 and Kafka 9092.
func lognodePorts() []int { return []int{4317, 4318, 8080, 9090, 9092} }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBucket(t *testing.T) {
	c := loadDir(t, modulePath(t))
	bucketKey, _ := one(t, c, "aws_s3_bucket")
	for _, typ := range []string{
		"aws_s3_bucket_public_access_block", "aws_s3_bucket_versioning",
		"aws_s3_bucket_server_side_encryption_configuration", "aws_s3_bucket_lifecycle_configuration",
		"aws_s3_bucket_notification", "aws_s3_bucket_ownership_controls",
	} {
		_, b := one(t, c, typ)
		if !refersDirectly(attr(t, b, "bucket"), bucketKey) {
			t.Errorf("%s does not configure %s", typ, bucketKey)
		}
	}
	_, pab := one(t, c, "aws_s3_bucket_public_access_block")
	for _, name := range []string{"block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"} {
		if v, ok := boolAttr(pab, name); !ok || !v {
			t.Errorf("public access block %s is not true", name)
		}
	}
	_, ver := one(t, c, "aws_s3_bucket_versioning")
	if got := stringAttr(mustBlock(t, ver, "versioning_configuration"), "status"); got != "Disabled" {
		t.Errorf("bucket versioning %q, want Disabled", got)
	}
	_, lc := one(t, c, "aws_s3_bucket_lifecycle_configuration")
	aborts := 0
	for _, rule := range blocksOf(lc, "rule") {
		if stringAttr(rule, "status") == "Enabled" && len(blocksOf(rule, "abort_incomplete_multipart_upload")) == 1 {
			aborts++
		}
	}
	if aborts != 1 {
		t.Errorf("want one enabled lifecycle rule aborting incomplete multipart uploads, have %d", aborts)
	}
	_, sse := one(t, c, "aws_s3_bucket_server_side_encryption_configuration")
	def := mustBlock(t, mustBlock(t, sse, "rule"), "apply_server_side_encryption_by_default")
	if !refersDirectly(attr(t, def, "sse_algorithm"), "var.bucket_sse_algorithm") {
		t.Error("bucket encryption does not follow var.bucket_sse_algorithm")
	}

	// wal/ object-created notifications go to the queue, after the queue policy exists.
	_, notif := one(t, c, "aws_s3_bucket_notification")
	queues := blocksOf(notif, "queue")
	if len(queues) != 1 {
		t.Fatalf("bucket notification has %d queue blocks, want 1", len(queues))
	}
	q := queues[0]
	queueKey := ""
	for _, tr := range attr(t, q, "queue_arn").Variables() {
		if tr.RootName() == "aws_sqs_queue" && stepName(tr, 2) == "arn" {
			queueKey = "aws_sqs_queue." + stepName(tr, 1)
		}
	}
	if _, ok := c.resources[queueKey]; !ok {
		t.Fatalf("bucket notification queue_arn is not an aws_sqs_queue's arn")
	}
	if got := stringAttr(q, "filter_prefix"); got != "wal/" {
		t.Errorf("notification filter_prefix %q, want wal/", got)
	}
	events, _ := stringList(attr(t, q, "events"))
	if !contains(events, "s3:ObjectCreated:*") {
		t.Errorf("notification events %v lack s3:ObjectCreated:*", events)
	}
	if dep, ok := notif.Attributes["depends_on"]; !ok || !refersDirectly(dep.Expr, "aws_sqs_queue_policy") {
		t.Error("bucket notification must depend on the queue policy (S3 tests delivery when it is configured)")
	}

	// The queue has a dead-letter queue.
	qb := c.resources[queueKey].Body
	rp, ok := qb.Attributes["redrive_policy"]
	if !ok {
		t.Fatalf("%s has no redrive_policy", queueKey)
	}
	dlq := ""
	for _, tr := range rp.Expr.Variables() {
		if tr.RootName() == "aws_sqs_queue" && "aws_sqs_queue."+stepName(tr, 1) != queueKey {
			dlq = "aws_sqs_queue." + stepName(tr, 1)
		}
	}
	if dlq == "" {
		t.Errorf("%s redrive_policy names no other queue as dead-letter queue", queueKey)
	}

	// The queue policy lets s3.amazonaws.com send, from the bucket only.
	policies := 0
	for _, key := range c.resourcesOf("aws_sqs_queue_policy") {
		p := c.resources[key].Body
		if !refersDirectly(attr(t, p, "queue_url"), queueKey) {
			continue
		}
		policies++
		doc := policyDoc(t, c, attr(t, p, "policy"))
		if !c.allowsS3FromBucket(doc, queueKey, bucketKey) {
			t.Errorf("%s does not let s3.amazonaws.com send to %s with aws:SourceArn = %s", key, queueKey, bucketKey)
		}
	}
	if policies != 1 {
		t.Errorf("%s has %d queue policies, want 1", queueKey, policies)
	}
}

// policyDoc resolves data.aws_iam_policy_document.X.json to X's body.
func policyDoc(t *testing.T, c *config, e hclsyntax.Expression) *hclsyntax.Body {
	t.Helper()
	for _, tr := range e.Variables() {
		if tr.RootName() == "data" && stepName(tr, 1) == "aws_iam_policy_document" {
			if d, ok := c.data["aws_iam_policy_document."+stepName(tr, 2)]; ok {
				return d.Body
			}
		}
	}
	t.Fatalf("%s: policy is not an aws_iam_policy_document", e.Range())
	return nil
}

// allowsS3FromBucket reports whether doc has an Allow statement for sqs:SendMessage on queue
// with principal service s3.amazonaws.com and aws:SourceArn tied to the bucket.
func (c *config) allowsS3FromBucket(doc *hclsyntax.Body, queue, bucket string) bool {
	for _, st := range blocksOf(doc, "statement") {
		if e := stringAttr(st, "effect"); e != "" && e != "Allow" {
			continue
		}
		actions, _ := stringList(st.Attributes["actions"].Expr)
		if !contains(actions, "sqs:SendMessage") {
			continue
		}
		if a, ok := st.Attributes["resources"]; !ok || !refersDirectly(a.Expr, queue) {
			continue
		}
		s3 := false
		for _, p := range blocksOf(st, "principals") {
			ids, _ := stringList(p.Attributes["identifiers"].Expr)
			if stringAttr(p, "type") == "Service" && contains(ids, "s3.amazonaws.com") {
				s3 = true
			}
		}
		source := false
		for _, cond := range blocksOf(st, "condition") {
			if stringAttr(cond, "variable") == "aws:SourceArn" && strings.HasPrefix(stringAttr(cond, "test"), "Arn") &&
				refersDirectly(cond.Attributes["values"].Expr, bucket+".arn") {
				source = true
			}
		}
		if s3 && source {
			return true
		}
	}
	return false
}

func TestCoordinationTable(t *testing.T) {
	c := loadDir(t, modulePath(t))
	_, tbl := one(t, c, "aws_dynamodb_table")
	for name, want := range map[string]string{"billing_mode": "PAY_PER_REQUEST", "hash_key": "pk", "range_key": "sk"} {
		if got := stringAttr(tbl, name); got != want {
			t.Errorf("table %s = %q, want %q", name, got, want)
		}
	}
	attrs := map[string]string{}
	for _, a := range blocksOf(tbl, "attribute") {
		attrs[stringAttr(a, "name")] = stringAttr(a, "type")
	}
	if fmt.Sprint(attrs) != fmt.Sprint(map[string]string{"pk": "S", "sk": "S"}) {
		t.Errorf("table attributes %v, want pk and sk strings only", attrs)
	}
	ttl := mustBlock(t, tbl, "ttl")
	if stringAttr(ttl, "attribute_name") != "expires_at" {
		t.Errorf("TTL attribute %q, want expires_at", stringAttr(ttl, "attribute_name"))
	}
	if on, ok := boolAttr(ttl, "enabled"); !ok || !on {
		t.Error("TTL is not enabled")
	}
	if on, ok := boolAttr(mustBlock(t, tbl, "point_in_time_recovery"), "enabled"); !ok || !on {
		t.Error("point-in-time recovery is not enabled")
	}
}

// statement is one IAM statement of a policy document, static or dynamic.
type statement struct {
	doc       string
	sid       string
	effect    string
	actions   []string
	resources []hclsyntax.Expression
	body      *hclsyntax.Body
}

func (c *config) statements(t *testing.T, docKey string) []statement {
	t.Helper()
	d, ok := c.data[docKey]
	if !ok {
		t.Fatalf("no data %s", docKey)
	}
	var out []statement
	for _, st := range blocksOf(d.Body, "statement") {
		s := statement{doc: docKey, sid: stringAttr(st, "sid"), effect: stringAttr(st, "effect"), body: st}
		if s.effect == "" {
			s.effect = "Allow"
		}
		if a, ok := st.Attributes["actions"]; ok {
			acts, ok := stringList(a.Expr)
			if !ok {
				t.Errorf("%s: actions must be a literal list", a.SrcRange)
			}
			s.actions = acts
		}
		if a, ok := st.Attributes["resources"]; ok {
			tup, ok := a.Expr.(*hclsyntax.TupleConsExpr)
			if !ok {
				t.Errorf("%s: resources must be a list literal", a.SrcRange)
			} else {
				s.resources = tup.Exprs
			}
		}
		out = append(out, s)
	}
	return out
}

// checkDataActions reports statements that allow S3 or DynamoDB actions on anything but the
// module's bucket and table ARNs.
func (c *config) checkDataActions(t *testing.T) []string {
	var problems []string
	for _, key := range sortedKeys(c.data) {
		if !strings.HasPrefix(key, "aws_iam_policy_document.") {
			continue
		}
		for _, s := range c.statements(t, key) {
			if s.effect != "Allow" {
				continue
			}
			var s3, ddb bool
			for _, a := range s.actions {
				if a == "*" {
					problems = append(problems, fmt.Sprintf("%s %q: allows every action", key, s.sid))
				}
				s3 = s3 || strings.HasPrefix(a, "s3:")
				ddb = ddb || strings.HasPrefix(a, "dynamodb:")
			}
			if !s3 && !ddb {
				continue
			}
			if s3 && ddb {
				problems = append(problems, fmt.Sprintf("%s %q: mixes S3 and DynamoDB actions", key, s.sid))
			}
			if len(s.resources) == 0 {
				problems = append(problems, fmt.Sprintf("%s %q: data actions without resources", key, s.sid))
			}
			for _, r := range s.resources {
				if v, ok := literal(r); ok && v.Type() == cty.String && strings.Contains(v.AsString(), "*") && !strings.HasSuffix(v.AsString(), "/*") {
					problems = append(problems, fmt.Sprintf("%s %q: resource %q", key, s.sid, v.AsString()))
					continue
				}
				want := "aws_s3_bucket"
				if ddb {
					want = "aws_dynamodb_table"
				}
				if !refersDirectly(r, want) {
					problems = append(problems, fmt.Sprintf("%s %q: resource at %s is not an %s ARN", key, s.sid, r.Range(), want))
				}
			}
		}
	}
	return problems
}

// rolePolicies maps each aws_iam_role key to the policy documents its inline policies use and
// the managed policy ARN expressions attached to it.
func (c *config) rolePolicies(t *testing.T) (docs map[string][]string, managed map[string][]hclsyntax.Expression) {
	docs = map[string][]string{}
	managed = map[string][]hclsyntax.Expression{}
	roleOf := func(e hclsyntax.Expression) string {
		for _, tr := range e.Variables() {
			if tr.RootName() == "aws_iam_role" {
				return "aws_iam_role." + stepName(tr, 1)
			}
		}
		return ""
	}
	for _, key := range c.resourcesOf("aws_iam_role_policy") {
		b := c.resources[key].Body
		role := roleOf(attr(t, b, "role"))
		pol := attr(t, b, "policy")
		for _, tr := range pol.Variables() {
			if tr.RootName() == "data" && stepName(tr, 1) == "aws_iam_policy_document" {
				docs[role] = append(docs[role], "aws_iam_policy_document."+stepName(tr, 2))
			}
		}
		if len(docs[role]) == 0 {
			t.Errorf("%s: inline policy is not an aws_iam_policy_document (cannot be checked)", key)
		}
	}
	for _, key := range c.resourcesOf("aws_iam_role_policy_attachment") {
		b := c.resources[key].Body
		role := roleOf(attr(t, b, "role"))
		managed[role] = append(managed[role], attr(t, b, "policy_arn"))
	}
	return docs, managed
}

func TestIAMLeastPrivilege(t *testing.T) {
	c := loadDir(t, modulePath(t))
	for _, p := range c.checkDataActions(t) {
		t.Error(p)
	}
	docs, managed := c.rolePolicies(t)

	// The log node task role: objects in the bucket, items in the table.
	_, td := one(t, c, "aws_ecs_task_definition")
	taskRole := ""
	for _, tr := range attr(t, td, "task_role_arn").Variables() {
		if tr.RootName() == "aws_iam_role" {
			taskRole = "aws_iam_role." + stepName(tr, 1)
		}
	}
	if len(docs[taskRole]) == 0 {
		t.Fatalf("log node task role %q has no inline policy", taskRole)
	}
	granted := map[string]bool{}
	for _, d := range docs[taskRole] {
		for _, s := range c.statements(t, d) {
			for _, a := range s.actions {
				granted[a] = true
			}
		}
	}
	for _, a := range []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket",
		"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query"} {
		if !granted[a] {
			t.Errorf("log node task role lacks %s", a)
		}
	}
	if len(managed[taskRole]) > 0 {
		t.Errorf("log node task role has managed policies attached; keep it to the inline policy")
	}

	// The sequencer's instance role: nothing on S3 or DynamoDB.
	_, inst := one(t, c, "aws_instance")
	profile := ""
	for _, tr := range attr(t, inst, "iam_instance_profile").Variables() {
		if tr.RootName() == "aws_iam_instance_profile" {
			profile = "aws_iam_instance_profile." + stepName(tr, 1)
		}
	}
	pb, ok := c.resources[profile]
	if !ok {
		t.Fatalf("sequencer instance profile %q not declared", profile)
	}
	seqRole := ""
	for _, tr := range attr(t, pb.Body, "role").Variables() {
		if tr.RootName() == "aws_iam_role" {
			seqRole = "aws_iam_role." + stepName(tr, 1)
		}
	}
	if seqRole == "" || seqRole == taskRole {
		t.Fatalf("sequencer role %q must be its own role", seqRole)
	}
	// The sequencer's role: nothing on DynamoDB, and on S3 only its backups: objects under
	// backups/sequencer/, and listing the bucket only under that prefix.
	for _, d := range docs[seqRole] {
		for _, s := range c.statements(t, d) {
			for _, a := range s.actions {
				if strings.HasPrefix(a, "dynamodb:") {
					t.Errorf("sequencer role is granted %s (%s)", a, d)
				}
				if !strings.HasPrefix(a, "s3:") {
					continue
				}
				src := ""
				for _, r := range s.resources {
					src += exprSource(t, r)
				}
				switch {
				case a == "s3:ListBucket":
					var prefixed bool
					for _, cond := range blocksOf(s.body, "condition") {
						vals, _ := stringList(attr(t, cond, "values"))
						prefixed = prefixed || (stringAttr(cond, "variable") == "s3:prefix" && fmt.Sprint(vals) == "[backups/sequencer/*]")
					}
					if !prefixed {
						t.Errorf("sequencer role may list the whole bucket (%s %q): only backups/sequencer/", d, s.sid)
					}
				case !strings.HasSuffix(src, `/backups/sequencer/*"`) && !strings.Contains(src, "/backups/sequencer/*"):
					t.Errorf("sequencer role is granted %s on %s: only backups/sequencer/*", a, src)
				}
			}
		}
	}
	for _, e := range managed[seqRole] {
		src := exprSource(t, e)
		if strings.Contains(src, "S3") || strings.Contains(src, "DynamoDB") || strings.Contains(src, "AdministratorAccess") || strings.Contains(src, "PowerUser") {
			t.Errorf("sequencer role gets managed policy %s", src)
		}
	}
}

func TestLogNodeEnvironment(t *testing.T) {
	c := loadDir(t, modulePath(t))
	_, td := one(t, c, "aws_ecs_task_definition")
	defs := attr(t, td, "container_definitions")
	if !refersDirectly(defs, "var.lognode_image") {
		t.Error("the log node container does not run var.lognode_image")
	}
	env := c.envVars(defs)
	check := func(name string, refs ...string) {
		t.Helper()
		vals := env[name]
		if len(vals) != 1 {
			t.Errorf("log node environment sets %s %d times, want once", name, len(vals))
			return
		}
		for _, r := range refs {
			if !c.refersTo(vals[0], r) {
				t.Errorf("%s does not come from %s", name, r)
			}
		}
	}
	check("LOAM_BUCKET", "aws_s3_bucket.data")
	check("LOAM_SEQUENCER", "aws_network_interface.sequencer", "local.rpc_port")
	check("LOAM_HTTP_ADDR", "local.http_port")
	check("LOAM_ZONE")
	if vals := env["LOAM_ZONE"]; len(vals) == 1 {
		if _, constant := literal(vals[0]); constant {
			t.Error("LOAM_ZONE is a constant; it must be the task's zone")
		}
	}
	// The bucket URL is the s3:// form lognode-svc's --bucket accepts.
	if vals := env["LOAM_BUCKET"]; len(vals) == 1 {
		src := exprSource(t, c.resolveLocal(vals[0]))
		if !strings.HasPrefix(src, `"s3://`) {
			t.Errorf("LOAM_BUCKET %s is not an s3:// URL", src)
		}
	}
	// The zone comes from the subnet map the task runs in: one task definition and one service
	// per zone, the service in that zone's subnet only.
	_, svc := one(t, c, "aws_ecs_service")
	if exprSource(t, attr(t, td, "for_each")) != "var.subnet_ids" || exprSource(t, attr(t, svc, "for_each")) != "var.subnet_ids" {
		t.Error("task definition and service must both be per zone (for_each = var.subnet_ids)")
	}
	if got := exprSource(t, attr(t, mustBlock(t, svc, "network_configuration"), "subnets")); got != "[each.value]" {
		t.Errorf("service subnets %s, want its own zone's subnet [each.value]", got)
	}
	if !refersDirectly(attr(t, svc, "desired_count"), "var.lognode_count_per_zone") {
		t.Error("service desired_count does not follow var.lognode_count_per_zone")
	}
}

// envVars collects container environment entries, following locals: list-style objects
// {name = "X", value = ...} and map entries whose key looks like an environment variable.
func (c *config) envVars(e hclsyntax.Expression) map[string][]hclsyntax.Expression {
	out := map[string][]hclsyntax.Expression{}
	c.visit(e, func(n hclsyntax.Node) {
		obj, ok := n.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return
		}
		var name string
		var value hclsyntax.Expression
		for _, item := range obj.Items {
			k, ok := literal(item.KeyExpr)
			if !ok || k.Type() != cty.String {
				continue
			}
			switch key := k.AsString(); {
			case key == "name":
				if v, ok := literal(item.ValueExpr); ok && v.Type() == cty.String {
					name = v.AsString()
				}
			case key == "value":
				value = item.ValueExpr
			case isEnvName(key):
				out[key] = append(out[key], item.ValueExpr)
			}
		}
		if isEnvName(name) && value != nil {
			out[name] = append(out[name], value)
		}
	})
	return out
}

func isEnvName(s string) bool {
	return strings.Contains(s, "_") && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == "" && s[0] >= 'A' && s[0] <= 'Z'
}

// resolveLocal follows e while it is just a local value (local.x) to that value's expression.
func (c *config) resolveLocal(e hclsyntax.Expression) hclsyntax.Expression {
	for range 16 {
		st, ok := e.(*hclsyntax.ScopeTraversalExpr)
		if !ok || st.Traversal.RootName() != "local" || len(st.Traversal) != 2 {
			return e
		}
		a, ok := c.locals[stepName(st.Traversal, 1)]
		if !ok {
			return e
		}
		e = a.Expr
	}
	return e
}

// exprSource is the source text of e.
func exprSource(t *testing.T, e hclsyntax.Expression) string {
	t.Helper()
	b, err := os.ReadFile(e.Range().Filename)
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Range().SliceBytes(b))
}

func TestSequencerVoters(t *testing.T) {
	c := loadDir(t, modulePath(t))
	v, ok := c.variables["sequencer_voters"]
	if !ok {
		t.Fatal("no variable sequencer_voters")
	}
	if n, _ := c.number(attr(t, v.Body, "default")); n != 3 {
		t.Errorf("sequencer_voters defaults to %d, want 3", n)
	}
	// One network interface, volume, instance and attachment per voter, over the same set.
	var forEach []string
	for _, typ := range []string{"aws_network_interface", "aws_ebs_volume", "aws_instance", "aws_volume_attachment"} {
		_, b := one(t, c, typ)
		forEach = append(forEach, exprSource(t, attr(t, b, "for_each")))
	}
	for _, fe := range forEach[1:] {
		if fe != forEach[0] {
			t.Errorf("voter resources iterate over different sets: %v", forEach)
			break
		}
	}
	_, vol := one(t, c, "aws_ebs_volume")
	if !refersDirectly(attr(t, vol, "availability_zone"), "each.value.zone") {
		t.Error("each voter's volume must be in that voter's zone")
	}
	if enc, ok := boolAttr(vol, "encrypted"); !ok || !enc {
		t.Error("voter volumes must be encrypted")
	}
	_, eni := one(t, c, "aws_network_interface")
	if !refersDirectly(attr(t, eni, "subnet_id"), "each.value.subnet_id") {
		t.Error("each voter's address must be in that voter's subnet")
	}
	_, inst := one(t, c, "aws_instance")
	pni := mustBlock(t, inst, "primary_network_interface")
	if !refersDirectly(attr(t, pni, "network_interface_id"), "aws_network_interface.sequencer") {
		t.Error("the voter instance does not use its stable network interface")
	}
	if !refersDirectly(attr(t, inst, "user_data"), "var.sequencer_image") {
		t.Error("the voter's user data does not run var.sequencer_image")
	}
	md := mustBlock(t, inst, "metadata_options")
	if stringAttr(md, "http_tokens") != "required" {
		t.Error("voters must require IMDSv2")
	}
	_, att := one(t, c, "aws_volume_attachment")
	if !refersDirectly(attr(t, att, "volume_id"), "aws_ebs_volume.sequencer") || !refersDirectly(attr(t, att, "instance_id"), "aws_instance.sequencer") {
		t.Error("the attachment must join each voter's volume to its instance")
	}
}

func TestCheckersFindBadIAM(t *testing.T) {
	c := mustParse(t, `
resource "aws_s3_bucket" "data" {}
resource "aws_dynamodb_table" "coord" {}
data "aws_iam_policy_document" "bad" {
  statement {
    sid       = "Star"
    actions   = ["s3:GetObject"]
    resources = ["*"]
  }
  statement {
    sid       = "Mixed"
    actions   = ["s3:GetObject", "dynamodb:GetItem"]
    resources = [aws_s3_bucket.data.arn]
  }
  statement {
    sid       = "WrongArn"
    actions   = ["dynamodb:GetItem"]
    resources = [aws_s3_bucket.data.arn]
  }
  dynamic "statement" {
    for_each = [1]
    content {
      sid       = "Everything"
      actions   = ["*"]
      resources = ["arn:aws:s3:::x"]
    }
  }
  statement {
    sid       = "Fine"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.data.arn}/*"]
  }
  statement {
    sid       = "DenyIsFine"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = ["*"]
  }
}
`)
	got := strings.Join(c.checkDataActions(t), "\n")
	for _, want := range []string{`"Star": resource "*"`, `"Mixed": mixes`, `"WrongArn": resource at`, `"Everything": allows every action`} {
		if !strings.Contains(got, want) {
			t.Errorf("checkDataActions missed %s; got:\n%s", want, got)
		}
	}
	for _, wrong := range []string{`"Fine"`, `"DenyIsFine"`} {
		if strings.Contains(got, wrong) {
			t.Errorf("checkDataActions wrongly reported %s; got:\n%s", wrong, got)
		}
	}
}

func TestCheckersFindMissingEnvironment(t *testing.T) {
	c := mustParse(t, `
locals {
  env = { LOAM_BUCKET = "s3://fixed", OTHER_VAR = "x" }
}
resource "aws_ecs_task_definition" "t" {
  container_definitions = jsonencode([{
    environment = [for k, v in local.env : { name = k, value = v }]
    extra       = [{ name = "LOAM_ZONE", value = "a" }]
  }])
}
`)
	env := c.envVars(c.resources["aws_ecs_task_definition.t"].Body.Attributes["container_definitions"].Expr)
	if len(env["LOAM_BUCKET"]) != 1 || len(env["OTHER_VAR"]) != 1 || len(env["LOAM_ZONE"]) != 1 {
		t.Errorf("envVars did not follow the local: %v", sortedKeys(env))
	}
	if c.refersTo(env["LOAM_BUCKET"][0], "aws_s3_bucket.data") {
		t.Error("refersTo found a bucket reference in a constant")
	}
	if len(env["LOAM_SEQUENCER"]) != 0 {
		t.Error("envVars invented LOAM_SEQUENCER")
	}
}

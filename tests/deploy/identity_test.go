package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

const identitySecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:loam/cluster-identity-AbCdEf"

// TestEvaluatedClusterIdentity: with cluster_identity, the log node's task
// definition feeds the secret's three JSON keys to an init container through `secrets`, the log
// node starts after it and reads the files it wrote, the voters fetch the secret before every
// start and run with mutual TLS, and the functions learn the secret's ARN.
func TestEvaluatedClusterIdentity(t *testing.T) {
	c := loadDir(t, modulePath(t))
	vars := baseVars(3, ecrSequencer, ecrLognode)
	vars["cluster_identity"] = cty.ObjectVal(map[string]cty.Value{"secret_arn": cty.StringVal(identitySecret), "server_name": cty.StringVal("sequencer.loam")})
	e := evaluate(t, c, vars)

	td := c.resources["aws_ecs_task_definition.lognode"]
	ctx := e.with("eu-west-1a", cty.StringVal("subnet-0a00000000000001"))
	raw := e.value(t, td.Body.Attributes["container_definitions"].Expr, ctx).AsString()
	var defs []struct {
		Name        string
		Image       string
		Essential   bool
		User        string
		EntryPoint  []string
		Command     []string
		Secrets     []struct{ Name, ValueFrom string }
		Environment []struct{ Name, Value string }
		DependsOn   []struct{ ContainerName, Condition string }
		MountPoints []struct {
			SourceVolume, ContainerPath string
			ReadOnly                    bool
		}
	}
	if err := json.Unmarshal([]byte(raw), &defs); err != nil {
		t.Fatalf("container_definitions: %v\n%s", err, raw)
	}
	if len(defs) != 2 || defs[0].Name != "identity" || defs[1].Name != "lognode" {
		t.Fatalf("containers %+v, want identity then lognode", defs)
	}
	init, node := defs[0], defs[1]
	if init.Essential || init.Image != "public.ecr.aws/docker/library/busybox:1.37" {
		t.Errorf("init container essential=%v image %s", init.Essential, init.Image)
	}
	secrets := map[string]string{}
	for _, s := range init.Secrets {
		secrets[s.Name] = s.ValueFrom
	}
	for name, key := range map[string]string{"IDENTITY_CA": "ca", "IDENTITY_CERT": "cert", "IDENTITY_KEY": "key"} {
		if secrets[name] != identitySecret+":"+key+"::" {
			t.Errorf("secret %s = %q, want the secret's %q key", name, secrets[name], key)
		}
	}
	if len(node.Secrets) != 0 {
		t.Errorf("the log node itself gets secrets %v", node.Secrets)
	}
	if len(node.DependsOn) != 1 || node.DependsOn[0].ContainerName != "identity" || node.DependsOn[0].Condition != "SUCCESS" {
		t.Errorf("log node dependsOn %+v", node.DependsOn)
	}
	if len(node.MountPoints) != 1 || node.MountPoints[0].SourceVolume != "identity" || !node.MountPoints[0].ReadOnly ||
		len(init.MountPoints) != 1 || init.MountPoints[0].ContainerPath != node.MountPoints[0].ContainerPath {
		t.Errorf("mounts: init %+v, node %+v", init.MountPoints, node.MountPoints)
	}
	env := map[string]string{}
	for _, kv := range node.Environment {
		env[kv.Name] = kv.Value
	}
	for name, want := range map[string]string{
		"LOAM_CLUSTER_CA": "/identity/ca.pem", "LOAM_CLUSTER_CERT": "/identity/cert.pem", "LOAM_CLUSTER_KEY": "/identity/key.pem",
		"LOAM_CLUSTER_SERVER_NAME": "sequencer.loam",
	} {
		if env[name] != want {
			t.Errorf("log node %s = %q, want %q", name, env[name], want)
		}
	}
	if !mustBlockNamed(c, "aws_ecs_task_definition.lognode", "volume") {
		t.Error("the task definition declares no volume for the identity")
	}

	// The init container's script, run by a real shell: it writes exactly the three PEMs the
	// log node is pointed at (chown to the image's user needs root, so a fake chown here).
	if len(init.EntryPoint) != 2 || len(init.Command) != 1 {
		t.Fatalf("init entryPoint %v command %v", init.EntryPoint, init.Command)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "chown"), []byte("#!/bin/sh\necho \"$@\" >>\"$CHOWN_LOG\"\n"), 0o755)
	out := filepath.Join(dir, "identity")
	os.MkdirAll(out, 0o755)
	script := strings.ReplaceAll(init.Command[0], "/identity", out)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "CHOWN_LOG=" + filepath.Join(dir, "chown.log"),
		"IDENTITY_CA=-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----",
		"IDENTITY_CERT=-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----",
		"IDENTITY_KEY=-----BEGIN EC PRIVATE KEY-----\nKEY\n-----END EC PRIVATE KEY-----"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init script: %v\n%s", err, b)
	}
	for file, want := range map[string]string{"ca.pem": "\nCA\n", "cert.pem": "\nCERT\n", "key.pem": "\nKEY\n"} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil || !strings.Contains(string(b), want) || !strings.HasSuffix(string(b), "-----\n") {
			t.Errorf("%s: %q %v", file, b, err)
		}
		if fi, _ := os.Stat(filepath.Join(out, file)); fi == nil || fi.Mode().Perm() != 0o400 {
			t.Errorf("%s mode %v, want 0400", file, fi.Mode())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "chown.log")); !strings.HasPrefix(string(b), "65532:65532 ") {
		t.Errorf("init script chowns %q, want to the image's user 65532", b)
	}

	// Voters: fetched before every start, and mutual TLS with the server name.
	for id, s := range e.renderUserData(t) {
		for _, want := range []string{
			"aws secretsmanager get-secret-value --region eu-west-1 --secret-id '" + identitySecret + "'",
			"ExecStartPre=/usr/local/libexec/loam-identity",
			"--tls-cert /data/identity/cert.pem --tls-key /data/identity/key.pem --cluster-ca /data/identity/ca.pem",
			"--cluster-server-name sequencer.loam",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("%s user data lacks %q", id, want)
			}
		}
		bashCheck(t, s)
	}

	// Functions get the secret's ARN (they fetch it at cold start) and the server name.
	fenv := e.locals["function_environment"]
	for it := fenv.ElementIterator(); it.Next(); {
		k, v := it.Element()
		m := stringMap(v)
		if m["LOAM_CLUSTER_IDENTITY_SECRET"] != identitySecret || m["LOAM_CLUSTER_SERVER_NAME"] != "sequencer.loam" {
			t.Errorf("function %s environment %v", k.AsString(), m)
		}
	}

	// Each role that reads the secret reads that secret only.
	doc := c.data["aws_iam_policy_document.identity"]
	if doc == nil {
		t.Fatal("no aws_iam_policy_document.identity")
	}
	st := mustBlock(t, doc.Body, "statement")
	if got := exprSource(t, attr(t, st, "actions")); got != `["secretsmanager:GetSecretValue"]` {
		t.Errorf("identity policy actions %s", got)
	}
	if got := exprSource(t, attr(t, st, "resources")); got != "[local.identity_secret_arn]" {
		t.Errorf("identity policy resources %s", got)
	}
	for _, r := range []string{"aws_iam_role_policy.lognode_execution_identity", "aws_iam_role_policy.sequencer_identity", "aws_iam_role_policy.function_identity"} {
		if c.resources[r] == nil {
			t.Errorf("no %s", r)
		}
	}
}

// TestEvaluatedWithoutIdentity: by default nothing of the identity is wired: one container,
// plaintext voters, no secret ARN for the functions.
func TestEvaluatedWithoutIdentity(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(3, ecrSequencer, ecrLognode))
	for id, s := range e.renderUserData(t) {
		if strings.Contains(s, "secretsmanager") || strings.Contains(s, "--tls-cert") {
			t.Errorf("%s: identity wired without cluster_identity", id)
		}
	}
	for it := e.locals["function_environment"].ElementIterator(); it.Next(); {
		_, v := it.Element()
		if _, ok := stringMap(v)["LOAM_CLUSTER_IDENTITY_SECRET"]; ok {
			t.Error("functions get LOAM_CLUSTER_IDENTITY_SECRET without an identity")
		}
	}
	if e.locals["identity_enabled"].True() {
		t.Error("identity enabled by default")
	}
}

// TestVPCEndpoints: gateway endpoints for S3 and DynamoDB by default on the VPC's route
// tables (or the given ones), interface endpoints only when asked.
func TestVPCEndpoints(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(3, ecrSequencer, ecrLognode))
	if got := strs(e.locals["gateway_endpoints"]); strings.Join(got, ",") != "dynamodb,s3" {
		t.Errorf("default gateway endpoints %v", got)
	}
	if got := strs(e.locals["endpoint_route_table_ids"]); strings.Join(got, ",") != "rtb-0a1b2c3d4e5f60718" {
		t.Errorf("gateway endpoints' route tables %v, want the VPC's", got)
	}
	vars := baseVars(3, ecrSequencer, ecrLognode)
	vars["vpc_endpoint_route_table_ids"] = cty.ListVal([]cty.Value{cty.StringVal("rtb-0000000000000000a")})
	e = evaluate(t, c, vars)
	if got := strs(e.locals["endpoint_route_table_ids"]); strings.Join(got, ",") != "rtb-0000000000000000a" {
		t.Errorf("gateway endpoints' route tables %v, want the given one", got)
	}
	gw := c.resources["aws_vpc_endpoint.gateway"]
	if gw == nil || exprSource(t, attr(t, gw.Body, "service_name")) != `"com.amazonaws.${local.region}.${each.key}"` {
		t.Fatal("aws_vpc_endpoint.gateway names no regional service")
	}
	ifc := c.resources["aws_vpc_endpoint.interface"]
	if ifc == nil || exprSource(t, attr(t, ifc.Body, "for_each")) != "var.vpc_interface_endpoints" {
		t.Fatal("interface endpoints do not follow vpc_interface_endpoints")
	}
	if v, ok := boolAttr(ifc.Body, "private_dns_enabled"); !ok || !v {
		t.Error("interface endpoints need private DNS, or the SDKs keep resolving the public names")
	}
}

func mustBlockNamed(c *config, resource, typ string) bool {
	r := c.resources[resource]
	return r != nil && len(blocksOf(r.Body, typ)) > 0
}

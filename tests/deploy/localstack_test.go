package deploy

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/loamhq/loam/tests/testserver"
)

func localstackPath(t testing.TB) string { return filepath.Join(repoRoot(t), "local", "localstack") }

// compose is the part of a compose file the checks read.
type compose struct {
	Name     string
	Services map[string]struct {
		Image string
		Build struct {
			Context    string
			Dockerfile string
		}
		Command     []string
		Environment map[string]string
		Ports       []string
		Volumes     []string
		Networks    map[string]struct {
			IPv4Address string `yaml:"ipv4_address"`
		}
		DependsOn yaml.Node `yaml:"depends_on"`
	}
	Networks map[string]struct {
		Name string
		IPAM struct {
			Config []struct {
				Subnet  string
				IPRange string `yaml:"ip_range"`
				Gateway string
			}
		}
	}
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(localstackPath(t), "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// rootDefaults reads the literal defaults of local/localstack's variables and the literal
// arguments of its module call.
func rootValues(t *testing.T) (vars map[string]string, args map[string]string) {
	t.Helper()
	c := loadDir(t, localstackPath(t))
	vars, args = map[string]string{}, map[string]string{}
	for name, v := range c.variables {
		if a, ok := v.Body.Attributes["default"]; ok {
			if val, ok := literal(a.Expr); ok && val.Type().FriendlyName() == "string" {
				vars[name] = val.AsString()
			}
		}
	}
	m := c.modules["loam"]
	if m == nil {
		t.Fatal(`local/localstack declares no module "loam"`)
	}
	for name, a := range m.Body.Attributes {
		if val, ok := literal(a.Expr); ok && val.Type().FriendlyName() == "string" {
			args[name] = val.AsString()
		}
	}
	return vars, args
}

// TestLocalStackCompose checks compose.yaml against the Terraform the script applies: LocalStack
// with the services the module needs, the sequencer and log node images built from the
// repository's Dockerfiles under the names the module is given, the sequencer at the voter
// address the functions are wired to, and the log node's environment naming the bucket,
// table, sequencer and ports the module would give an ECS task.
func TestLocalStackCompose(t *testing.T) {
	c := loadCompose(t)
	vars, args := rootValues(t)
	for _, name := range []string{"localstack", "sequencer", "lognode"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml has no service %q", name)
		}
	}
	ls := c.Services["localstack"]
	if !strings.HasPrefix(ls.Image, "localstack/localstack:") || strings.HasSuffix(ls.Image, ":latest") {
		t.Errorf("localstack image %q: want a pinned localstack/localstack tag", ls.Image)
	}
	services := strings.Split(ls.Environment["SERVICES"], ",")
	for _, want := range []string{"s3", "sqs", "lambda", "dynamodb", "kms", "iam", "sts", "logs", "ec2", "scheduler"} {
		if !slices.Contains(services, want) {
			t.Errorf("LocalStack SERVICES lacks %s: %v", want, services)
		}
	}
	if !slices.Contains(ls.Ports, "127.0.0.1:4566:4566") {
		t.Errorf("LocalStack ports %v: provider_override.tf talks to localhost:4566", ls.Ports)
	}
	if !slices.Contains(ls.Volumes, "/var/run/docker.sock:/var/run/docker.sock") {
		t.Error("LocalStack runs Lambda functions in containers: it needs the Docker socket")
	}
	if len(c.Networks) != 1 {
		t.Fatalf("want one network, got %v", c.Networks)
	}
	var netKey string
	for k := range c.Networks {
		netKey = k
	}
	network := c.Networks[netKey]
	if ls.Environment["LAMBDA_DOCKER_NETWORK"] != network.Name || network.Name == "" {
		t.Errorf("LAMBDA_DOCKER_NETWORK %q is not the compose network's name %q: the functions could not reach the sequencer",
			ls.Environment["LAMBDA_DOCKER_NETWORK"], network.Name)
	}
	if len(network.IPAM.Config) != 1 {
		t.Fatal("the network needs one IPAM config (fixed addresses)")
	}
	subnet := netip.MustParsePrefix(network.IPAM.Config[0].Subnet)
	dynamic := netip.MustParsePrefix(network.IPAM.Config[0].IPRange)
	ip := func(svc string) netip.Addr {
		a, err := netip.ParseAddr(c.Services[svc].Networks[netKey].IPv4Address)
		if err != nil {
			t.Fatalf("service %s has no fixed address on %s: %v", svc, netKey, err)
		}
		if !subnet.Contains(a) || dynamic.Contains(a) {
			t.Errorf("%s's address %s: want it in %s and outside the dynamic range %s", svc, a, subnet, dynamic)
		}
		return a
	}
	lsIP, seqIP, _ := ip("localstack"), ip("sequencer"), ip("lognode")

	// The sequencer is where the module's LOAM_SEQUENCER points: sequencer_private_ips.
	if vars["sequencer_ip"] != seqIP.String() {
		t.Errorf("main.tf puts the voter at %s, compose.yaml runs the sequencer at %s", vars["sequencer_ip"], seqIP)
	}
	mc := loadDir(t, localstackPath(t))
	if got := exprSource(t, attr(t, mc.modules["loam"].Body, "sequencer_private_ips")); got != "[var.sequencer_ip]" {
		t.Errorf("module sequencer_private_ips = %s, want [var.sequencer_ip]", got)
	}
	seq := c.Services["sequencer"]
	wantCmd := []string{"--id=seq-1", "--rpc-addr=" + seqIP.String() + ":7070", "--raft-addr=" + seqIP.String() + ":7071", "--bootstrap", "--data-dir=/data"}
	for _, w := range wantCmd {
		if !slices.Contains(seq.Command, w) {
			t.Errorf("sequencer command %v lacks %s", seq.Command, w)
		}
	}
	// Images: built from the repository's Dockerfiles, under the names main.tf gives the module.
	for svc, arg := range map[string]string{"sequencer": "sequencer_image", "lognode": "lognode_image"} {
		s := c.Services[svc]
		if s.Image != args[arg] {
			t.Errorf("%s image %q, main.tf's %s %q", svc, s.Image, arg, args[arg])
		}
		ctx := filepath.Join(localstackPath(t), s.Build.Context)
		if filepath.Clean(ctx) != repoRoot(t) {
			t.Errorf("%s builds from %s, want the repository root (the Dockerfiles' context)", svc, ctx)
		}
		if _, err := os.Stat(filepath.Join(ctx, s.Build.Dockerfile)); err != nil || s.Build.Dockerfile != "infra/"+svc+".Dockerfile" {
			t.Errorf("%s dockerfile %q: %v", svc, s.Build.Dockerfile, err)
		}
	}

	// The log node: what the module's task definition sets, pointed at LocalStack.
	ln := c.Services["lognode"]
	env := ln.Environment
	bucket, err := url.Parse(env["LOAM_BUCKET"])
	if err != nil || bucket.Scheme != "s3" || bucket.Host != vars["bucket_name"] || args["bucket_name"] != "" {
		t.Errorf("LOAM_BUCKET %q: want s3://%s (main.tf's bucket_name)", env["LOAM_BUCKET"], vars["bucket_name"])
	}
	if q := bucket.Query(); q.Get("endpoint") != "http://"+lsIP.String()+":4566" || q.Get("path_style") != "true" {
		t.Errorf("LOAM_BUCKET %q: want endpoint=http://%s:4566 and path_style=true", env["LOAM_BUCKET"], lsIP)
	}
	table := loadDir(t, modulePath(t)).resources["aws_dynamodb_table.coord"]
	if got := exprSource(t, attr(t, table.Body, "name")); got != `"${var.name}-coord"` {
		t.Fatalf("the module's table name is %s; this check assumes \"${var.name}-coord\"", got)
	}
	if env["LOAM_COORD_TABLE"] != vars["name"]+"-coord" || env["LOAM_COORD_ENDPOINT"] != "http://"+lsIP.String()+":4566" {
		t.Errorf("LOAM_COORD_TABLE %q LOAM_COORD_ENDPOINT %q, want %s-coord at LocalStack", env["LOAM_COORD_TABLE"], env["LOAM_COORD_ENDPOINT"], vars["name"])
	}
	if env["LOAM_SEQUENCER"] != seqIP.String()+":7070" {
		t.Errorf("LOAM_SEQUENCER %q, want %s:7070", env["LOAM_SEQUENCER"], seqIP)
	}
	if env["LOAM_ZONE"] != vars["region"]+"a" {
		t.Errorf("LOAM_ZONE %q, want %sa (the first subnet's zone, where the sequencer's address lies)", env["LOAM_ZONE"], vars["region"])
	}
	// Every port the module serves on a log node is served and published here.
	addrs := map[string]int{"LOAM_HTTP_ADDR": 8080, "LOAM_GRPC_ADDR": 9090, "LOAM_KAFKA_ADDR": 9092, "LOAM_OTLP_GRPC_ADDR": 4317, "LOAM_OTLP_HTTP_ADDR": 4318}
	var ports []int
	for name, port := range addrs {
		if env[name] != "0.0.0.0:"+strconv.Itoa(port) {
			t.Errorf("%s = %q, want 0.0.0.0:%d", name, env[name], port)
		}
		if !slices.Contains(ln.Ports, fmt.Sprintf("127.0.0.1:%d:%d", port, port)) {
			t.Errorf("log node port %d not published on 127.0.0.1", port)
		}
		ports = append(ports, port)
	}
	slices.Sort(ports)
	if fmt.Sprint(ports) != fmt.Sprint(lognodePorts()) {
		t.Errorf("compose serves %v, the module %v", ports, lognodePorts())
	}
	// Every variable the module's task gets that names a setting also appears here (AWS
	// addresses aside, which the module gets from the task's role and region).
	e := evaluate(t, loadDir(t, modulePath(t)), baseVars(1, ecrSequencer, ecrLognode))
	for name := range stringMap(e.locals["lognode_environment"].GetAttr("eu-west-1a")) {
		if strings.HasPrefix(name, "LOAM_EMF_") {
			continue // CloudWatch's embedded metrics: nothing reads them on LocalStack
		}
		if _, ok := env[name]; !ok {
			t.Errorf("the module's log node task sets %s; compose.yaml's log node does not", name)
		}
	}
	if !strings.HasPrefix(env["LOAM_ADMIN_KEY"], "${LOAM_ADMIN_KEY:?") {
		t.Errorf("LOAM_ADMIN_KEY %q: want it from up.sh's .env, required", env["LOAM_ADMIN_KEY"])
	}
}

// upTargets is the TARGETS list of up.sh.
func upTargets(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(localstackPath(t), "up.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nTARGETS=\((.*?)\n\)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("up.sh has no TARGETS=( ... ) list")
	}
	return strings.Fields(string(m[1]))
}

// TestLocalStackRoot: local/localstack's Terraform wires (references resolve, the module call
// passes what the module requires), every target up.sh applies is a resource of the module,
// and the scripts pass bash -n.
func TestLocalStackRoot(t *testing.T) {
	c := loadDir(t, localstackPath(t))
	for _, p := range c.checkReferences() {
		t.Error(p)
	}
	for _, p := range c.checkModuleCalls() {
		t.Error(p)
	}
	mod := loadDir(t, modulePath(t))
	targets := upTargets(t)
	if len(targets) < 5 {
		t.Fatalf("up.sh TARGETS %v", targets)
	}
	for _, target := range targets {
		r, ok := strings.CutPrefix(target, "module.loam.")
		if !ok || mod.resources[r] == nil {
			t.Errorf("up.sh target %s is not a resource of terraform/modules/loam", target)
		}
	}
	for _, s := range []string{"up.sh", "smoke.sh"} {
		if out, err := exec.Command("bash", "-n", filepath.Join(localstackPath(t), s)).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
}

// tfMirror makes a filesystem mirror of the cached hashicorp/aws provider and a CLI
// configuration that uses it; it skips when the provider is not built on this machine.
func tfMirror(t *testing.T, dir string) (tf, cli string) {
	t.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH")
	}
	provider := providerBinary(t)
	mirror := filepath.Join(dir, "mirror")
	pdir := filepath.Join(mirror, "registry.terraform.io", "hashicorp", "aws", providerMirrorVersion, "linux_amd64")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(provider, filepath.Join(pdir, "terraform-provider-aws_v"+providerMirrorVersion)); err != nil {
		t.Fatal(err)
	}
	cli = filepath.Join(dir, "terraformrc")
	os.WriteFile(cli, fmt.Appendf(nil, "provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"hashicorp/aws\"]\n  }\n  direct {\n    exclude = [\"hashicorp/aws\"]\n  }\n}\n", mirror), 0o644)
	return tf, cli
}

// copyRoot copies a root module's .tf files into dir, the module source made absolute, and
// local/localstack/provider_override.tf with LocalStack's address replaced by endpoint.
func copyRoot(t *testing.T, src, dir, endpoint string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	files, _ := filepath.Glob(filepath.Join(src, "*.tf"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		b = regexp.MustCompile(`source\s*=\s*"(\.\./[^"]+)"`).ReplaceAllFunc(b, func(m []byte) []byte {
			rel := regexp.MustCompile(`"(.*)"`).FindSubmatch(m)[1]
			return fmt.Appendf(nil, "source = %q", filepath.Join(src, string(rel)))
		})
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
	}
	ov, err := os.ReadFile(filepath.Join(localstackPath(t), "provider_override.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ov, []byte("http://localhost:4566")) {
		t.Fatal("provider_override.tf does not point at http://localhost:4566")
	}
	os.WriteFile(filepath.Join(dir, "provider_override.tf"), bytes.ReplaceAll(ov, []byte("http://localhost:4566"), []byte(endpoint)), 0o644)
}

func tfRun(t *testing.T, tf, cli, dir string, timeout time.Duration, args ...string) string {
	t.Helper()
	cmd := exec.Command(tf, append([]string{"-chdir=" + dir}, args...)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cli, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("terraform %s: %v", args[0], time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, tailErrors(out.Bytes()))
		}
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("terraform %s: still running after %v\n%s", args[0], timeout, tail(out.Bytes(), 4000))
	}
	return out.String()
}

// TestLocalStackTerraformOnMoto runs what up.sh runs of Terraform, with the provider override
// pointed at moto_server instead of LocalStack: init, validate, and the targeted apply of the
// parts LocalStack's free edition serves. It then checks through terraform's state that the
// apply made the bucket's notification, the segmenter's mapping and the functions, and made
// nothing up.sh leaves to compose (no EC2 instance, ECS service or load balancer).
func TestLocalStackTerraformOnMoto(t *testing.T) {
	if testing.Short() {
		t.Skip("applies part of the module (a minute)")
	}
	dir := t.TempDir()
	tf, cli := tfMirror(t, dir)
	moto := testserver.StartMoto(t)
	zips := filepath.Join(dir, "functions")
	if out, err := exec.Command("bash", filepath.Join(repoRoot(t), "functions", "build.sh"), "-o", zips, "-arch", "amd64").CombinedOutput(); err != nil {
		t.Fatalf("functions/build.sh: %v\n%s", err, out)
	}
	root := filepath.Join(dir, "root")
	copyRoot(t, localstackPath(t), root, moto)
	tfRun(t, tf, cli, root, 2*time.Minute, "init", "-input=false", "-no-color")
	tfRun(t, tf, cli, root, 2*time.Minute, "validate", "-no-color")
	args := []string{"apply", "-auto-approve", "-input=false", "-no-color", "-var", "functions_dir=" + zips, "-var", "architecture=x86_64"}
	for _, target := range upTargets(t) {
		args = append(args, "-target="+target)
	}
	tfRun(t, tf, cli, root, 10*time.Minute, args...)
	state := tfRun(t, tf, cli, root, time.Minute, "state", "list")
	for _, want := range []string{"module.loam.aws_s3_bucket_notification.data", "module.loam.aws_lambda_event_source_mapping.segmenter",
		`module.loam.aws_lambda_function.function["gc"]`, `module.loam.aws_scheduler_schedule.sweep["retention"]`,
		"module.loam.aws_dynamodb_table.coord", `module.loam.aws_vpc_endpoint.gateway["s3"]`, `module.loam.aws_network_interface.sequencer["seq-1"]`} {
		if !strings.Contains(state, want+"\n") {
			t.Errorf("state lacks %s", want)
		}
	}
	for _, never := range []string{"aws_instance.", "aws_ecs_service.", "aws_lb."} {
		if strings.Contains(state, never) {
			t.Errorf("the targeted apply made %s*, which compose runs instead", never)
		}
	}
	// The functions dial the sequencer container's address.
	show := tfRun(t, tf, cli, root, time.Minute, "state", "show", "-no-color", `module.loam.aws_lambda_function.function["segmenter"]`)
	if !regexp.MustCompile(`"LOAM_SEQUENCER"\s*=\s*"10\.42\.0\.10:7070"`).MatchString(show) {
		t.Errorf("segmenter's LOAM_SEQUENCER is not the sequencer container's 10.42.0.10:7070:\n%s", show)
	}
}

// TestMinimalExampleOnMoto: terraform/examples/minimal, with only a region and a name, passes
// validate and plans against moto_server through the same provider override.
func TestMinimalExampleOnMoto(t *testing.T) {
	if testing.Short() {
		t.Skip("plans the whole example")
	}
	dir := t.TempDir()
	tf, cli := tfMirror(t, dir)
	moto := testserver.StartMoto(t)
	zips := filepath.Join(dir, "functions")
	os.MkdirAll(zips, 0o755)
	for _, fn := range []string{"segmenter", "retention", "compaction", "gc"} {
		// plan reads the zips' hashes only; apply would upload them.
		os.WriteFile(filepath.Join(zips, fn+"-arm64.zip"), []byte("PK\x05\x06"+strings.Repeat("\x00", 18)), 0o644)
	}
	root := filepath.Join(dir, "root")
	copyRoot(t, filepath.Join(repoRoot(t), "terraform", "examples", "minimal"), root, moto)
	tfRun(t, tf, cli, root, 2*time.Minute, "init", "-input=false", "-no-color")
	tfRun(t, tf, cli, root, 2*time.Minute, "validate", "-no-color")
	out := tfRun(t, tf, cli, root, 5*time.Minute, "plan", "-input=false", "-no-color", "-var", "region=us-east-1", "-var", "name=loam-min", "-var", "functions_dir="+zips)
	for _, want := range []string{"aws_nat_gateway.this", "module.loam.aws_ecs_service.lognode[", `module.loam.aws_vpc_endpoint.gateway["dynamodb"]`,
		`module.loam.aws_instance.sequencer["seq-3"]`, "module.loam.aws_lb.lognode"} {
		if !strings.Contains(out, "# "+want) {
			t.Errorf("plan does not create %s", want)
		}
	}
	if m := regexp.MustCompile(`Plan: (\d+) to add, 0 to change, 0 to destroy`).FindStringSubmatch(out); m == nil {
		t.Errorf("plan summary missing:\n%s", tail([]byte(out), 2000))
	} else {
		t.Logf("examples/minimal: %s resources to add", m[1])
	}
}

// TestSmokeScriptOnMoto runs local/localstack/smoke.sh, the produce/consume part of up.sh,
// against `loam dev --aws` on moto_server: the script's commands run for real against the
// deployment's topology (bucket, table, notification queue) without Docker.
func TestSmokeScriptOnMoto(t *testing.T) {
	moto := testserver.StartMoto(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "loam"), filepath.Join(repoRoot(t), "cmd", "loam")).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/loam: %v\n%s", err, out)
	}
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	httpPort := port()
	dev := exec.Command(filepath.Join(bin, "loam"), "dev", "--aws", moto, "--data-dir", filepath.Join(dir, "data"),
		"--http-port", httpPort, "--grpc-port", "-1", "--kafka-port", "-1", "--otlp-http-port", "-1", "--otlp-grpc-port", "-1",
		"--sequencer-port", port(), "--raft-port", port())
	dev.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
	devOut := &lockedBuffer{}
	dev.Stdout, dev.Stderr = devOut, devOut
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dev.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { dev.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			dev.Process.Kill()
			<-done
		}
	})
	server := "http://127.0.0.1:" + httpPort
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(server + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("loam dev --aws did not become healthy:\n%s", devOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	smoke := exec.Command("bash", filepath.Join(localstackPath(t), "smoke.sh"))
	smoke.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOAM_SERVER="+server, "SMOKE_STREAM=smoke-moto", "SMOKE_RECORDS=50")
	out, err := smoke.CombinedOutput()
	if err != nil {
		t.Fatalf("smoke.sh: %v\n%s\nloam dev:\n%s", err, out, tail([]byte(devOut.String()), 3000))
	}
	if !strings.Contains(string(out), "smoke: stream smoke-moto on "+server+": 50 records produced and consumed back") {
		t.Errorf("smoke.sh output:\n%s", out)
	}
	// The records are in moto's S3: the topology is the deployment's, not the filesystem's.
	if !strings.Contains(devOut.String(), "loam-dev") {
		t.Errorf("loam dev --aws banner does not name the bucket:\n%s", devOut.String())
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// lockedBuffer is a bytes.Buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

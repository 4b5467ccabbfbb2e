package deploy

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is the instructions from one FROM to the next.
type stage struct {
	from  string // image reference
	name  string // AS name
	instr []instruction
}

// parseDockerfile splits src into stages. It knows what these Dockerfiles use: comments,
// backslash continuations, FROM [--platform=..] IMAGE [AS NAME].
func parseDockerfile(src string) ([]stage, error) {
	var stages []stage
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i + 1
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue
			}
			line = strings.TrimSuffix(line, "\\") + " " + next
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				fields = fields[1:]
			}
			if len(fields) == 0 {
				return nil, fmt.Errorf("line %d: FROM without an image", start)
			}
			st := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			return nil, fmt.Errorf("line %d: %s before FROM", start, in.cmd)
		}
		stages[len(stages)-1].instr = append(stages[len(stages)-1].instr, in)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// execForm parses a JSON-array instruction argument (ENTRYPOINT ["a", "b"]).
func execForm(args string) ([]string, bool) {
	var out []string
	if err := json.Unmarshal([]byte(args), &out); err != nil {
		return nil, false
	}
	return out, true
}

var goBuildRE = regexp.MustCompile(`go build [^&;]*?-o (\S+) (\./[A-Za-z0-9_./-]+)`)

type imageWant struct {
	file      string
	binary    string   // the service binary's package
	packages  []string // every package the build stage must build
	ports     []string // EXPOSE
	health    bool     // HEALTHCHECK expected
	entryBase string   // ENTRYPOINT binary base name
}

func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	for _, want := range []imageWant{
		{file: "sequencer.Dockerfile", binary: "./sequencer-svc", packages: []string{"./sequencer-svc"}, ports: []string{"7070", "7071"}, entryBase: "sequencer-svc"},
		{file: "lognode.Dockerfile", binary: "./lognode-svc", packages: []string{"./lognode-svc", "./infra/healthcheck"}, ports: []string{"8080"}, health: true, entryBase: "lognode-svc"},
	} {
		t.Run(want.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(root, "infra", want.file))
			if err != nil {
				t.Fatal(err)
			}
			stages, err := parseDockerfile(string(src))
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, root, want, stages)
			if _, err := os.Stat(filepath.Join(root, "infra", want.file+".dockerignore")); err != nil {
				t.Errorf("no %s.dockerignore: the whole .git would be sent as build context", want.file)
			}
		})
	}
}

func checkImage(t reporter, root string, want imageWant, stages []stage) {
	t.Helper()
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, have %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if build.from != "golang:1.26" || build.name == "" {
		t.Errorf("build stage FROM %s AS %q, want golang:1.26 AS <name>", build.from, build.name)
	}
	if !strings.HasPrefix(final.from, "gcr.io/distroless/") && !regexp.MustCompile(`^debian:[a-z0-9.-]*slim$`).MatchString(final.from) {
		t.Errorf("runtime stage FROM %s, want distroless or debian-slim", final.from)
	}
	staticRuntime := strings.HasPrefix(final.from, "gcr.io/distroless/static")

	// What the build stage builds, and where to.
	built := map[string]string{} // package → output path
	copiedGoMod := false
	for _, in := range build.instr {
		if in.cmd == "COPY" && strings.Contains(in.args, "go.mod") && strings.Contains(in.args, "go.sum") {
			copiedGoMod = true
		}
		if in.cmd != "RUN" {
			continue
		}
		for _, part := range strings.Split(in.args, "&&") {
			m := goBuildRE.FindStringSubmatch(part)
			if m == nil {
				continue
			}
			built[m[2]] = m[1]
			if staticRuntime && !strings.Contains(part, "CGO_ENABLED=0") {
				t.Errorf("line %d: %s is built with cgo possible but runs on distroless static: set CGO_ENABLED=0", in.line, m[2])
			}
		}
	}
	if !copiedGoMod {
		t.Errorf("build stage does not COPY go.mod and go.sum")
	}
	for _, pkg := range want.packages {
		if _, ok := built[pkg]; !ok {
			t.Errorf("build stage does not go build %s (builds %v)", pkg, built)
		}
		checkMainPackage(t, root, pkg)
	}

	// The runtime stage copies the built binaries from the build stage.
	copied := map[string]string{} // built path → destination dir or file
	for _, in := range final.all("COPY") {
		fields := strings.Fields(in.args)
		from := ""
		var paths []string
		for _, f := range fields {
			switch {
			case strings.HasPrefix(f, "--from="):
				from = strings.TrimPrefix(f, "--from=")
			case strings.HasPrefix(f, "--"):
			default:
				paths = append(paths, f)
			}
		}
		if from != build.name || len(paths) < 2 {
			continue
		}
		dst := paths[len(paths)-1]
		for _, p := range paths[:len(paths)-1] {
			copied[p] = dst
		}
	}
	installed := func(pkg string) string {
		out, ok := built[pkg]
		if !ok {
			return ""
		}
		dst, ok := copied[out]
		if !ok {
			t.Errorf("runtime stage does not COPY --from=%s %s", build.name, out)
			return ""
		}
		if strings.HasSuffix(dst, "/") {
			return dst + filepath.Base(out)
		}
		return dst
	}
	binPath := installed(want.binary)

	// Non-root user.
	users := final.all("USER")
	if len(users) == 0 {
		t.Errorf("runtime stage sets no USER: it would run as root")
	} else if u := strings.Fields(users[len(users)-1].args)[0]; u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:") {
		t.Errorf("runtime stage runs as %s", u)
	}

	// Ports.
	exposed := map[string]bool{}
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.args) {
			exposed[strings.TrimSuffix(p, "/tcp")] = true
		}
	}
	for _, p := range want.ports {
		if !exposed[p] {
			t.Errorf("runtime stage does not EXPOSE %s", p)
		}
	}
	for p := range exposed {
		if !contains(want.ports, p) {
			t.Errorf("runtime stage EXPOSEs %s, which the service does not serve", p)
		}
	}

	// Entrypoint runs the installed service binary (exec form: signals reach it).
	eps := final.all("ENTRYPOINT")
	if len(eps) != 1 {
		t.Fatalf("want one ENTRYPOINT, have %d", len(eps))
	}
	ep, ok := execForm(eps[0].args)
	if !ok || len(ep) == 0 {
		t.Fatalf("ENTRYPOINT %s is not in exec form", eps[0].args)
	}
	if filepath.Base(ep[0]) != want.entryBase || (binPath != "" && ep[0] != binPath) {
		t.Errorf("ENTRYPOINT runs %s, want the installed %s (%s)", ep[0], want.entryBase, binPath)
	}

	// Health check.
	hcs := final.all("HEALTHCHECK")
	if !want.health {
		if len(hcs) != 0 {
			t.Errorf("unexpected HEALTHCHECK %s", hcs[0].args)
		}
		return
	}
	if len(hcs) != 1 {
		t.Fatalf("want one HEALTHCHECK, have %d", len(hcs))
	}
	_, cmdArgs, ok := strings.Cut(hcs[0].args, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s has no CMD", hcs[0].args)
	}
	hc, ok := execForm(cmdArgs)
	if !ok || len(hc) != 2 {
		t.Fatalf("HEALTHCHECK CMD %s: want [probe, URL] in exec form (distroless has no shell)", cmdArgs)
	}
	if probe := installed("./infra/healthcheck"); hc[0] != probe {
		t.Errorf("HEALTHCHECK runs %s, but the probe is installed at %s", hc[0], probe)
	}
	if hc[1] != "http://127.0.0.1:"+want.ports[0]+"/healthz" {
		t.Errorf("HEALTHCHECK probes %s, want http://127.0.0.1:%s/healthz", hc[1], want.ports[0])
	}
	// The API must listen beyond loopback inside the container, on the exposed port.
	listen := ""
	for _, in := range final.all("ENV") {
		if v, ok := strings.CutPrefix(in.args, "LOAM_HTTP_ADDR="); ok {
			listen = v
		}
	}
	if listen != "0.0.0.0:"+want.ports[0] && listen != ":"+want.ports[0] {
		t.Errorf("ENV LOAM_HTTP_ADDR=%q, want 0.0.0.0:%s", listen, want.ports[0])
	}
}

// checkMainPackage checks that pkg (./dir) exists and, once it has Go files, is a main package.
func checkMainPackage(t reporter, root, pkg string) {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(pkg))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("%s: not a directory of the repository", pkg)
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		names = append(names, pf.Name.Name)
	}
	if len(names) == 0 {
		t.Logf("%s has no Go files at its root yet: cannot check it is a main package", pkg)
		return
	}
	for _, n := range names {
		if n != "main" {
			t.Errorf("%s is package %s, not main: go build would produce no binary", pkg, n)
		}
	}
}

// TestImagesMatchTerraform checks the facts the Terraform module assumes about the images: the
// probe's path in the log node image and the runtime user's uid (65532, distroless nonroot).
func TestImagesMatchTerraform(t *testing.T) {
	c := loadDir(t, modulePath(t))
	probe := c.resolveLocal(c.locals["lognode_healthcheck_binary"].Expr)
	pv, ok := literal(probe)
	if !ok {
		t.Fatal("local.lognode_healthcheck_binary is not a constant")
	}
	uid, ok := c.number(c.locals["container_uid"].Expr)
	if !ok || uid != 65532 {
		t.Errorf("local.container_uid = %d, want 65532 (distroless nonroot)", uid)
	}
	ln, err := os.ReadFile(filepath.Join(repoRoot(t), "infra", "lognode.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ln), pv.AsString()) {
		t.Errorf("the lognode image has no %s, which the task definition's health check runs", pv.AsString())
	}
	for _, f := range []string{"lognode.Dockerfile", "sequencer.Dockerfile"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "infra", f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), ":nonroot") {
			t.Errorf("%s: runtime image is not a distroless :nonroot variant (uid 65532)", f)
		}
	}
}

func TestDockerfileCheckerFindsProblems(t *testing.T) {
	stages, err := parseDockerfile(`
FROM golang:1.25 AS build
COPY . .
RUN go build -o /out/x ./sequencer-svc
FROM debian:bookworm
COPY --from=build /out/x /usr/bin/
EXPOSE 7070
ENTRYPOINT /usr/bin/x
`)
	if err != nil {
		t.Fatal(err)
	}
	var got collector
	got.run(func(r reporter) {
		checkImage(r, repoRoot(t), imageWant{file: "x", binary: "./sequencer-svc", packages: []string{"./sequencer-svc"}, ports: []string{"7070", "7071"}, entryBase: "sequencer-svc"}, stages)
	})
	report := strings.Join(got.msgs, "\n")
	for _, want := range []string{"FROM golang:1.25", "FROM debian:bookworm", "does not COPY go.mod", "no USER", "EXPOSE 7071", "not in exec form"} {
		if !strings.Contains(report, want) {
			t.Errorf("checkImage missed %q; reported:\n%s", want, report)
		}
	}
}

// reporter is the part of testing.TB the image checks use, so that their self-test can
// collect what they report.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// collector is a reporter that records messages; Fatalf ends the checking goroutine.
type collector struct{ msgs []string }

func (c *collector) Helper()                      {}
func (c *collector) Logf(string, ...any)          {}
func (c *collector) Errorf(f string, args ...any) { c.msgs = append(c.msgs, fmt.Sprintf(f, args...)) }
func (c *collector) Fatalf(f string, args ...any) {
	c.msgs = append(c.msgs, fmt.Sprintf(f, args...))
	runtime.Goexit()
}

// run calls fn on its own goroutine (so Fatalf can end it) and waits.
func (c *collector) run(fn func(reporter)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(c)
	}()
	<-done
}

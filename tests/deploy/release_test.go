package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestReleaseWorkflow: the release workflow builds every image the minimal example defaults
// to, from Dockerfiles that exist, for both architectures the module runs on, and the
// functions' zips with the documented command.
func TestReleaseWorkflow(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, ".github/workflows/release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On   map[string]map[string][]string `yaml:"on"`
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Include []struct{ Image, Dockerfile string }
				}
			}
			Steps []struct {
				Uses string
				Run  string
				With map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	if tags := wf.On["push"]["tags"]; len(tags) != 1 || tags[0] != "v*" {
		t.Fatalf("release.yml runs on tags %v, want v*", tags)
	}
	built := map[string]bool{}
	img := wf.Jobs["images"]
	var push map[string]string
	for _, s := range img.Steps {
		if strings.HasPrefix(s.Uses, "docker/build-push-action@") {
			push = s.With
		}
	}
	if push == nil || !strings.Contains(push["platforms"], "linux/arm64") || !strings.Contains(push["platforms"], "linux/amd64") {
		t.Fatalf("the images job builds for %q, want linux/arm64 and linux/amd64", push["platforms"])
	}
	for _, m := range img.Strategy.Matrix.Include {
		if _, err := os.Stat(filepath.Join(root, m.Dockerfile)); err != nil {
			t.Errorf("image %s: %v", m.Image, err)
		}
		for _, tag := range strings.Split(push["tags"], "\n") {
			if tag = strings.TrimSpace(tag); tag != "" {
				built[strings.ReplaceAll(tag, "${{ matrix.image }}", m.Image)] = true
			}
		}
	}
	vars, err := os.ReadFile(filepath.Join(root, "terraform/examples/minimal/variables.tf"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := regexp.MustCompile(`default\s*=\s*"(ghcr\.io/[^"]+)"`).FindAllStringSubmatch(string(vars), -1)
	if len(defaults) != 2 {
		t.Fatalf("examples/minimal names %d ghcr.io image defaults, want 2", len(defaults))
	}
	for _, d := range defaults {
		if !built[d[1]] {
			t.Errorf("examples/minimal defaults to %s, which the release workflow does not publish (it publishes %v)", d[1], built)
		}
	}
	ran := false
	for _, s := range wf.Jobs["functions"].Steps {
		ran = ran || strings.TrimSpace(s.Run) == "bash functions/build.sh"
	}
	if !ran {
		t.Error("the functions job does not run bash functions/build.sh")
	}
}

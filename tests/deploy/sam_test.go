package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestSAMTemplateLints runs cfn-lint (which understands the SAM transform) over
// template.yaml and checks it declares the four functions. CI machines have cfn-lint;
// elsewhere the lint is skipped unless LOAM_REQUIRE_SERVERS=1.
func TestSAMTemplateLints(t *testing.T) {
	path := filepath.Join(repoRoot(t), "template.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"functions/segmenter", "functions/retention", "functions/compaction", "functions/gc"} {
		if !strings.Contains(string(b), fn) {
			t.Errorf("template.yaml does not declare %s", fn)
		}
	}
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
			t.Fatal("cfn-lint is not on PATH")
		}
		t.Skip("cfn-lint is not on PATH")
	}
	out, err := exec.Command(bin, path).CombinedOutput()
	if err != nil {
		t.Fatalf("cfn-lint template.yaml: %v\n%s", err, out)
	}
}

// TestSAMEnvVarsDeclared: sam local invoke --env-vars overrides only variables the template
// declares, so every variable functions/events/sam-env.json sets is declared in the
// template's Globals.
func TestSAMEnvVarsDeclared(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Globals struct {
			Function struct {
				Environment struct {
					Variables map[string]yaml.Node `yaml:"Variables"`
				} `yaml:"Environment"`
			} `yaml:"Function"`
		} `yaml:"Globals"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	declared := tmpl.Globals.Function.Environment.Variables
	if len(declared) == 0 {
		t.Fatal("template.yaml declares no Globals.Function.Environment.Variables")
	}
	eb, err := os.ReadFile(filepath.Join(repoRoot(t), "functions", "events", "sam-env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Parameters map[string]string }
	if err := json.Unmarshal(eb, &env); err != nil {
		t.Fatal(err)
	}
	for name := range env.Parameters {
		if _, ok := declared[name]; !ok {
			t.Errorf("sam-env.json sets %s, which template.yaml does not declare: sam would drop it", name)
		}
	}
}

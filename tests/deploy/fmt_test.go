package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTerraformFmt runs terraform fmt -check over terraform/ when terraform is on PATH.
func TestTerraformFmt(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
			t.Fatal("terraform is not on PATH (it is preinstalled on our machines)")
		}
		t.Skip("terraform is not on PATH: fmt -check not run")
	}
	cmd := exec.Command(tf, "fmt", "-check", "-recursive", "-diff", filepath.Join(repoRoot(t), "terraform"), filepath.Join(repoRoot(t), "local", "localstack"))
	// No CLI configuration or plugin cache is needed for fmt; keep the user's out of it.
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+os.DevNull, "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("terraform fmt -check: %v\n%s", err, out)
	}
}

// TestTFLint runs tflint's bundled Terraform ruleset (all rules, local module calls followed)
// over the module, the examples and local/localstack when tflint is on PATH. It needs no plugin download.
func TestTFLint(t *testing.T) {
	bin, err := exec.LookPath("tflint")
	if err != nil {
		if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
			t.Fatal("tflint is not on PATH: .ci/tools.sh installs it into .tools/bin")
		}
		t.Skip("tflint is not on PATH: not run (go install github.com/terraform-linters/tflint@v0.64.0)")
	}
	cfg := filepath.Join(t.TempDir(), "tflint.hcl")
	if err := os.WriteFile(cfg, []byte("config {\n  call_module_type = \"local\"\n}\n\nplugin \"terraform\" {\n  enabled = true\n  preset  = \"all\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{modulePath(t), examplePath(t), filepath.Join(repoRoot(t), "terraform", "examples", "minimal"), localstackPath(t)} {
		cmd := exec.Command(bin, "--config", cfg, "--format", "compact", "--chdir", dir)
		cmd.Env = append(os.Environ(), "TFLINT_PLUGIN_DIR="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("tflint %s: %v\n%s", dir, err, out)
		}
	}
}

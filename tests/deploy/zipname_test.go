package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestFunctionZipNamesMatchBuildScript: for either architecture the module looks for the zips
// under the names functions/build.sh writes (<function>-<GOARCH>.zip: amd64, not x86_64).
func TestFunctionZipNamesMatchBuildScript(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "functions", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`case "\$arch" in ([a-z0-9 |]+)\)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("functions/build.sh: no `case \"$arch\" in ...)` naming the architectures it builds")
	}
	built := map[string]bool{}
	for _, a := range strings.Split(m[1], "|") {
		built[strings.TrimSpace(a)] = true
	}
	c := loadDir(t, modulePath(t))
	for arch, goarch := range map[string]string{"arm64": "arm64", "x86_64": "amd64"} {
		vars := baseVars(3, ecrSequencer, ecrLognode)
		vars["architecture"] = cty.StringVal(arch)
		e := evaluate(t, c, vars)
		for fn, zip := range stringMap(e.locals["function_zip"]) {
			want := "dist/functions/" + fn + "-" + goarch + ".zip"
			if zip != want || !built[goarch] {
				t.Errorf("architecture %s: the module reads %s; functions/build.sh -arch %s writes %s (builds %v)", arch, zip, goarch, want, m[1])
			}
		}
	}
}

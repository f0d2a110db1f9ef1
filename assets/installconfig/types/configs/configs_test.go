package configs

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"local", "none"}) {
		t.Errorf("Names() = %q", got)
	}
	if Default() != "local" {
		t.Errorf("Default() = %q, want the first platform", Default())
	}
	if p, ok := Get("none"); !ok || p.Name() != "none" {
		t.Errorf("Get(none) = %v, %v", p, ok)
	}
	if _, ok := Get("aws"); ok {
		t.Error("Get(aws) found a platform kiln does not implement")
	}
}

// Assets and the node agents must not link provisioning: Terraform, the
// machines, the node image. The platforms' config packages they import are
// leaves.
func TestAssetsDoNotDependOnProvisioning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps",
		"github.com/kiln-project/kiln/assets/...", "github.com/kiln-project/kiln/cmd/internal/node/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/hashicorp/terraform",
		"github.com/kiln-project/kiln/platforms/terraform",
		"github.com/kiln-project/kiln/platforms/provisioners",
		"github.com/kiln-project/kiln/platforms/local/",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("assets or node agents depend on %s", pkg)
			}
		}
	}
}

package nodeimage

import (
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// TestRegistryComponent checks the registry's build (the wrapper module's
// main package, the version it reports) and that the node image (its
// components and so its cache key) leaves it out, as it runs on the host.
func TestRegistryComponent(t *testing.T) {
	c := registryComponent()
	cmd := goBuildCmd("/go/bin/go", "/cache", c, "/src", "/out")
	want := []string{"build", "-v", "-trimpath", "-ldflags",
		"-s -w -X github.com/distribution/distribution/v3/version.version=" + release.RegistryVersion, "-o", "/out/", "."}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("go build argv = %q, want %q", cmd.Args, want)
	}
	for _, ic := range components() {
		if ic.Name == c.Name {
			t.Errorf("the node image's components include %s", c.Name)
		}
	}
}

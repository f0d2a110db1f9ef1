package ignitionconfigs_test

import (
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/ignition"
)

// certsDir is containerd's config_path on the nodes.
const certsDir = "/etc/containerd/certs.d/"

// registryHostsFiles returns the hosts.toml files of c, each as its path
// and content.
func registryHostsFiles(t *testing.T, c types.Config) string {
	t.Helper()
	var b strings.Builder
	for _, f := range c.Storage.Files {
		if !strings.HasPrefix(f.Path, certsDir) {
			continue
		}
		data, _, err := ignition.FileContents(c, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("== " + f.Path + "\n" + string(data))
	}
	return b.String()
}

// TestRegistryHosts checks containerd's hosts.toml files against
// testdata/registry-hosts.golden: the same on every machine, the
// registry's own name leading to it on the API VIP, each mirror trying it
// first under its name.
func TestRegistryHosts(t *testing.T) {
	boot := generatedBootstrap(t)
	got := registryHostsFiles(t, boot)
	golden(t, "registry-hosts.golden", got)
	for _, role := range []string{"master", "worker"} {
		if other := registryHostsFiles(t, served(t, boot, role)); other != got {
			t.Errorf("the %s config's hosts.toml files differ from the bootstrap machine's:\n%s", role, diff(got, other))
		}
	}
}

// Without the add-on, no machine gets a hosts.toml.
func TestRegistryHostsOff(t *testing.T) {
	dir := newDir(t)
	editInstallConfig(t, dir, "  local:\n", "  local:\n    addons:\n      registry: false\n")
	boot := bootstrapIn(t, dir)
	for _, c := range []types.Config{boot, served(t, boot, "master"), served(t, boot, "worker")} {
		if files := registryHostsFiles(t, c); files != "" {
			t.Errorf("registry off, yet hosts.toml files:\n%s", files)
		}
	}
}

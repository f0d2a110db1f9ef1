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

// install-config's imageMirrors come after the add-on's registry for a
// registry it mirrors (docker.io), and alone for one it does not
// (quay.io), with a path prefix as the API root; on every machine.
func TestImageMirrors(t *testing.T) {
	dir := newDir(t)
	editInstallConfig(t, dir, "networking:\n", "imageMirrors:\n"+
		"- source: docker.io\n  mirrors: [mirror.example.com/dockerhub]\n"+
		"- source: quay.io\n  mirrors: [quay-mirror.example.com:8443, mirror.example.com/quay]\n"+
		"networking:\n")
	boot := bootstrapIn(t, dir)
	got := registryHostsFiles(t, boot)
	for _, want := range []string{
		`== /etc/containerd/certs.d/docker.io/hosts.toml
# kiln's registry add-on (docs/registry.md).
[host."http://198.51.100.1:5001/v2/docker.io"]
  capabilities = ["pull", "resolve"]
  override_path = true
# imageMirrors of install-config.
[host."https://mirror.example.com/v2/dockerhub"]
  capabilities = ["pull", "resolve"]
  override_path = true
`,
		`== /etc/containerd/certs.d/quay.io/hosts.toml
# imageMirrors of install-config.
[host."https://quay-mirror.example.com:8443"]
  capabilities = ["pull", "resolve"]
# imageMirrors of install-config.
[host."https://mirror.example.com/v2/quay"]
  capabilities = ["pull", "resolve"]
  override_path = true
`} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts.toml files lack\n%s\nin\n%s", want, got)
		}
	}
	for _, role := range []string{"master", "worker"} {
		if other := registryHostsFiles(t, served(t, boot, role)); other != got {
			t.Errorf("the %s config's hosts.toml files differ from the bootstrap machine's:\n%s", role, diff(got, other))
		}
	}
}

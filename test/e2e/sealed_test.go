package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// These machines are offline, and nothing a test does may reach the real
// network: every cluster the tests create here is sealed
// (networking.egress: None), but for the connected cluster of the
// simulated world (world_test.go), whose kiln runs in a network namespace
// whose only way out leads into that world, and the ssh cluster connected
// to its hosts' closed LAN (sshlan_test.go), where nothing routes out.

// requireSealed fails the test when args create a cluster (`create
// cluster --dir D`) from an install-config of D that is not sealed, but
// for kiln in the simulated world or on a closed LAN (the worldKiln and
// lanKiln wrappers).
func requireSealed(t *testing.T, kiln string, args []string) {
	t.Helper()
	if b := filepath.Base(kiln); b == worldKiln || b == lanKiln {
		return
	}
	i := slices.Index(args, "create")
	if i < 0 || i+1 >= len(args) || args[i+1] != "cluster" {
		return
	}
	dir := "."
	if j := slices.Index(args, "--dir"); j >= 0 && j+1 < len(args) {
		dir = args[j+1]
	}
	if err := sealed(filepath.Join(dir, "install-config.yaml")); err != nil {
		t.Fatalf("refusing to create a cluster that is not sealed on this offline machine: %v", err)
	}
}

// sealed returns an error unless the install-config at path sets
// networking.egress None. A --dir without one resumes a create whose
// install-config was checked when it started.
func sealed(path string) error {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var c types.Config
	if err := yaml.Unmarshal(data, &c); err != nil {
		return err
	}
	if c.Networking == nil || c.Networking.Egress != types.EgressNone {
		return &unsealedError{path}
	}
	return nil
}

// unsealedError names an install-config that is not sealed.
type unsealedError struct{ path string }

func (e *unsealedError) Error() string {
	return e.path + " does not set networking.egress: None"
}

// Every install-config the tests write is sealed: the local clusters'
// (writeInstallConfig), and any written inline in a test or script under
// test/ (a line "apiVersion: kiln.dev/v1") or copied from the example by a
// script or the Makefile's test targets (through test/sealed-config.sh).
func TestTestClustersAreSealed(t *testing.T) {
	dir := t.TempDir()
	writeInstallConfig(t, dir, "demo", 1, 0, "10.66.9.0/24", "")
	if err := sealed(filepath.Join(dir, "install-config.yaml")); err != nil {
		t.Errorf("writeInstallConfig: %v", err)
	}
	unsealed := filepath.Join(dir, "open.yaml")
	if err := os.WriteFile(unsealed, []byte("apiVersion: kiln.dev/v1\nnetworking:\n  egress: NAT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sealed(unsealed); err == nil {
		t.Errorf("an install-config with egress NAT passed as sealed")
	}
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "Makefile")}
	err := filepath.WalkDir(filepath.Join(root, "test"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "cli" || d.Name() == "testdata") {
			return filepath.SkipDir // scripts of the CLI create no cluster
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".sh") || strings.HasSuffix(p, ".go")) && !strings.HasSuffix(p, "sealed_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if strings.Contains(text, "apiVersion: kiln.dev/v1") && !strings.Contains(text, "egress: None") {
			t.Errorf("%s writes an install-config without networking.egress: None", f)
		}
		for i, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "docs/examples/install-config-local.yaml") && !strings.Contains(line, "sealed-config.sh") &&
				!strings.HasPrefix(strings.TrimSpace(line), "#") && !sealedTarget(f, text, i) {
				t.Errorf("%s:%d copies the example install-config without test/sealed-config.sh:\n%s", f, i+1, line)
			}
		}
	}
}

// sealedTarget reports whether line i of the Makefile belongs to a target
// that creates no test cluster: `make cluster` (a user's cluster, egress
// NAT by default) and validate-ignition (no machines).
func sealedTarget(file, text string, i int) bool {
	if filepath.Base(file) != "Makefile" {
		return false
	}
	lines := strings.Split(text, "\n")
	for j := i; j >= 0; j-- {
		if l := lines[j]; l != "" && l[0] != '\t' && l[0] != '#' && strings.Contains(l, ":") {
			target, _, _ := strings.Cut(l, ":")
			return target == "cluster" || target == "validate-ignition"
		}
	}
	return false
}

package installconfigtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// SSHExample returns docs/examples/install-config-ssh.yaml, parsed and
// defaulted: node1 the bootstrap host, node2-4 masters, node5 a worker,
// in 192.168.10.0/24.
func SSHExample(t testing.TB) *types.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "examples", "install-config-ssh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := installconfig.ParseDefaulted(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// moduleRoot returns the directory holding go.mod, found upwards from the
// working directory (go test runs a test in its package's directory). The
// source path the binary was compiled from is no help: make unit builds
// the tests with -trimpath.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("installconfigtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

package installconfigtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// SSHExample returns docs/examples/install-config-ssh.yaml, parsed and
// defaulted: node1 the bootstrap host, node2-4 masters, node5 a worker,
// in 192.168.10.0/24.
func SSHExample(t testing.TB) *types.Config {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("installconfigtest: no source path to find docs/examples from")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "..", "docs", "examples", "install-config-ssh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := installconfig.ParseDefaulted(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

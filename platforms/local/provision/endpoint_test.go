package provision

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms/lb"
)

// TestEndpointProblem: nothing is said of a cluster whose load balancer
// was never configured here; one configured but not running is named,
// with its log.
func TestEndpointProblem(t *testing.T) {
	dir := t.TempDir()
	proc := lb.ProcessIn("/usr/local/bin/kiln", dir)
	if p := endpointProblem(proc); p != "" {
		t.Errorf("no configuration: %q, want nothing", p)
	}
	if err := os.WriteFile(proc.ConfigPath, []byte(`{"services":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A stale pid file and status of a balancer that is gone.
	os.WriteFile(proc.PIDFile, []byte("999999999\n"), 0o600)
	os.WriteFile(lb.StatusPath(proc.ConfigPath), []byte(`{"services":[{"name":"api","backends":[{"addr":"10.0.0.10:6443","healthy":true}]}]}`), 0o600)
	p := endpointProblem(proc)
	if !strings.Contains(p, "the API load balancer is not running") || !strings.Contains(p, filepath.Join(dir, "lb.log")) {
		t.Errorf("stopped balancer: %q", p)
	}
}

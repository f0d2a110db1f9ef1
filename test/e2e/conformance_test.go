package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// conformanceTimeout bounds the subset run: the run itself takes under 10
// minutes; the rest is for a cold `kiln build conformance` (e2e.test and the
// test images from source) on a 2-core machine.
const conformanceTimeout = 60 * time.Minute

// runConformanceSubset runs the upstream conformance subset of
// test/conformance (make conformance-subset) against the cluster in dir,
// unless KILN_E2E_CONFORMANCE=0. The report directory is kept and logged.
func runConformanceSubset(t *testing.T, kiln, dir string) {
	t.Helper()
	if os.Getenv("KILN_E2E_CONFORMANCE") == "0" {
		t.Log("conformance subset not run: KILN_E2E_CONFORMANCE=0")
		return
	}
	report, err := os.MkdirTemp("", "kiln-e2e-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join("test", "conformance", "run.sh"), "subset")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "KILN="+kiln, "CLUSTER_DIR="+dir, "REPORT_DIR="+report, "KUBECONFIG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	summary := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "conformance: ") && strings.Contains(line, " passed, ") {
			summary = line
		}
	}
	t.Logf("%s (%s); report in %s", summary, time.Since(start).Round(time.Second), report)
	if err != nil || summary == "" {
		t.Errorf("conformance subset: %v\n%s", err, lastLines(out.String(), 40))
	}
}

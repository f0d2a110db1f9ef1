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
// minutes; the rest is for a cold `conformance build` (e2e.test and the
// test images from source, test/conformance/suite) on a 2-core machine.
const conformanceTimeout = 60 * time.Minute

// runConformanceSubset runs the upstream conformance subset of
// test/conformance (make conformance-subset) against the cluster in dir,
// unless KILN_E2E_CONFORMANCE=0. The report directory is kept and logged.
func runConformanceSubset(t *testing.T, kiln, dir string) {
	t.Helper()
	runUpstreamSubset(t, kiln, dir, "subset", "conformance")
}

// runNetpolSubset runs the upstream NetworkPolicy subset of
// test/conformance (test/conformance/netpol.go) the same way.
func runNetpolSubset(t *testing.T, kiln, dir string) {
	t.Helper()
	runUpstreamSubset(t, kiln, dir, "netpol-subset", "netpol")
}

// runUpstreamSubset runs test/conformance/run.sh MODE, whose summary line
// starts with label, unless KILN_E2E_CONFORMANCE=0.
func runUpstreamSubset(t *testing.T, kiln, dir, mode, label string) {
	t.Helper()
	if os.Getenv("KILN_E2E_CONFORMANCE") == "0" {
		t.Logf("%s not run: KILN_E2E_CONFORMANCE=0", mode)
		return
	}
	report, err := os.MkdirTemp("", "kiln-e2e-"+mode+"-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join("test", "conformance", "run.sh"), mode)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "KILN="+kiln, "CLUSTER_DIR="+dir, "REPORT_DIR="+report, "KUBECONFIG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	summary := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, label+": ") && strings.Contains(line, " passed, ") {
			summary = line
		}
	}
	t.Logf("%s (%s); report in %s", summary, time.Since(start).Round(time.Second), report)
	if err != nil || summary == "" {
		t.Errorf("%s: %v\n%s", mode, err, lastLines(out.String(), 40))
	}
}

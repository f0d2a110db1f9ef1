package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph/crashtest"
	"github.com/kiln-project/kiln/graph/installdir"
)

// TestKilnProcess runs kiln with the arguments in KILN_TEST_ARGS when set:
// the other tests start it as a separate kiln process.
func TestKilnProcess(t *testing.T) {
	argsJSON := os.Getenv("KILN_TEST_ARGS")
	if argsJSON == "" {
		t.Skip("runs only as a child kiln process")
	}
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		os.Exit(99)
	}
	os.Exit(run(args))
}

// kilnProcess is a kiln run in a child process.
func kilnProcess(args ...string) *exec.Cmd {
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilnProcess$")
	cmd.Env = append(os.Environ(), "KILN_TEST_ARGS="+string(b))
	return cmd
}

// D2: two `create ignition-configs` on one --dir at once: one runs, the
// other stops with exitcode.Busy naming it, and the Ignition configs and the
// kubeconfig always hold the certificates of the state's CAs.
func TestConcurrentCreateIgnitionConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 200 kiln processes")
	}
	const trials = 100
	config := "apiVersion: kiln.dev/v1\nmetadata:\n  name: dev\nbaseDomain: example.com\nplatform:\n  none: {}\n"
	inconsistent, busy := 0, 0
	for i := range trials {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		codes := make([]int, 2)
		outs := make([]bytes.Buffer, 2)
		for p := range 2 {
			wg.Go(func() {
				cmd := kilnProcess("create", "ignition-configs", "--dir", dir)
				cmd.Stderr = &outs[p]
				if err := cmd.Run(); err != nil {
					codes[p] = cmd.ProcessState.ExitCode()
				}
			})
		}
		wg.Wait()
		for p, code := range codes {
			switch code {
			case 0:
			case int(exitcode.Busy):
				busy++
				if !strings.Contains(outs[p].String(), "in use by another kiln (pid ") {
					t.Errorf("trial %d: busy message does not name the holder:\n%s", i, outs[p].String())
				}
			default:
				t.Errorf("trial %d: exit %d:\n%s", i, code, outs[p].String())
			}
		}
		if codes[0] != 0 && codes[1] != 0 {
			t.Errorf("trial %d: neither run succeeded", i)
		}
		if problem := crashtest.CheckCerts(dir, true); problem != "" {
			inconsistent++
			t.Errorf("trial %d: %s", i, problem)
		}
		for _, f := range []string{installdir.Lock, installdir.Journal} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				t.Errorf("trial %d: %s left in --dir", i, f)
			}
		}
	}
	t.Logf("%d concurrent pairs: %d runs refused as busy, %d inconsistent directories", trials, busy, inconsistent)
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph"
)

// execute exits with the code exitcode.Of chooses, also for what only
// execute knows: a usage error cobra refused, a run stopped by a signal.
func TestExecuteExitCodes(t *testing.T) {
	run := func(ctx context.Context, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		o := &rootOptions{stdin: strings.NewReader(hostileInstallConfig), stdout: &out, stderr: &errOut}
		return execute(ctx, o, args), errOut.String()
	}

	dir := t.TempDir()
	if code, stderr := run(context.Background(), "create", "install-config", "--dir", dir); code != 0 {
		t.Fatalf("create install-config: exit %d:\n%s", code, stderr)
	}

	if code, stderr := run(context.Background(), "create", "clusterz", "--dir", dir); code != int(exitcode.Input) {
		t.Errorf("unknown command: exit %d, want %d:\n%s", code, exitcode.Input, stderr)
	}

	l, err := graph.LockDir(dir, "kiln create cluster")
	if err != nil {
		t.Fatal(err)
	}
	code, stderr := run(context.Background(), "create", "manifests", "--dir", dir)
	if code != int(exitcode.Busy) || !strings.Contains(stderr, "in use by another kiln") {
		t.Errorf("--dir locked: exit %d, want %d:\n%s", code, exitcode.Busy, stderr)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code, stderr := run(ctx, "create", "manifests", "--dir", dir); code != int(exitcode.Interrupted) {
		t.Errorf("interrupted: exit %d, want %d:\n%s", code, exitcode.Interrupted, stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-project/kiln/graph/installdir"
)

// Long-running agents keep no debug log in memory and write none to --dir.
func TestNodeCommandsKeepNoDebugLog(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	o := &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
	if code := execute(context.Background(), o, []string{"--dir", dir, "node", "probe", "--resolve", "localhost"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if o.debug.buf.Len() != 0 || !o.debug.disabled {
		t.Errorf("node agent buffered %d bytes of debug log", o.debug.buf.Len())
	}
	if _, err := os.Stat(filepath.Join(dir, installdir.DebugLog)); !os.IsNotExist(err) {
		t.Errorf("node agent wrote %s: %v", installdir.DebugLog, err)
	}
	// version, explain and graph never touch --dir (it is often the
	// current directory, not an install dir).
	for _, args := range [][]string{{"version"}, {"explain", "installconfig"}, {"graph"}} {
		o = &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
		if code := execute(context.Background(), o, append([]string{"--dir", dir}, args...)); code != 0 {
			t.Fatal(code)
		}
		if _, err := os.Stat(filepath.Join(dir, installdir.DebugLog)); !os.IsNotExist(err) {
			t.Errorf("%v wrote %s: %v", args, installdir.DebugLog, err)
		}
	}
	// An ordinary command still keeps its debug log in --dir.
	ic := "apiVersion: kiln.dev/v1\nmetadata:\n  name: dev\nbaseDomain: example.com\nplatform:\n  none: {}\n"
	o = &rootOptions{stdin: bytes.NewReader([]byte(ic)), stdout: &out, stderr: &errOut}
	if code := execute(context.Background(), o, []string{"--dir", dir, "create", "install-config"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, installdir.DebugLog)); err != nil {
		t.Errorf("create install-config kept no debug log: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
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
	if _, err := os.Stat(filepath.Join(dir, debugLogName)); !os.IsNotExist(err) {
		t.Errorf("node agent wrote %s: %v", debugLogName, err)
	}
	// An ordinary command still keeps its debug log in --dir.
	o = &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
	if code := execute(context.Background(), o, []string{"--dir", dir, "version"}); code != 0 {
		t.Fatal(code)
	}
	if _, err := os.Stat(filepath.Join(dir, debugLogName)); err != nil {
		t.Errorf("version kept no debug log: %v", err)
	}
}

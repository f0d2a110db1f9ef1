package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// `kiln node probe --file` writes --body on its first run and prints what
// it finds on the next: the end-to-end storage test reads that from the
// pod logs of a StatefulSet's two lives.
func TestNodeProbeFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "probe.txt")
	for i, want := range []string{"wrote " + file + ": first\n", "read " + file + ": first\n"} {
		var out, errOut bytes.Buffer
		o := &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
		body := []string{"first", "second"}[i]
		if code := execute(context.Background(), o, []string{"--dir", dir, "node", "probe", "--file", file, "--body", body}); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errOut.String())
		}
		if out.String() != want {
			t.Errorf("run %d printed %q, want %q", i, out.String(), want)
		}
	}
}

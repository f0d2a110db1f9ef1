package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
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

// `kiln node probe --get URL --retry D` retries a failing fetch in the
// process and says on which try it succeeded; without --retry one failure
// is the command's failure.
func TestNodeProbeRetry(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("up"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		o := &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
		code := execute(context.Background(), o, append([]string{"--dir", dir, "node", "probe", "--get", srv.URL}, args...))
		return code, out.String()
	}
	if code, out := run(); code == 0 {
		t.Fatalf("without --retry the first (failing) fetch passed: %q", out)
	}
	calls.Store(0)
	code, out := run("--retry", "10s")
	if want := srv.URL + ": up (try 3)\n"; code != 0 || out != want {
		t.Errorf("with --retry: exit %d, printed %q; want 0, %q", code, out, want)
	}
}

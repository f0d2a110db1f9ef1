package remote

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/graph/atomicfile/atomicfiletest"
)

// tree writes files (path → content; a content starting with "-> " is a
// link to the rest) under a new directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// listTree describes the entries below dir (atomicfiletest.Tree), by
// their paths relative to dir, one per line in order.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	for p, desc := range atomicfiletest.Tree(t, dir) {
		if rel, _ := filepath.Rel(dir, p); rel != "." {
			lines = append(lines, rel+" "+desc)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestPushDir: a tree arrives whole, with its modes and links, reported
// as it goes; a second push replaces it; a cut push leaves what was.
func TestPushDir(t *testing.T) {
	c, srv, host := rootClient(t)
	src := tree(t, map[string]string{"usr/local/bin/kubelet": "kubelet", "usr/lib/cni/bridge": "bridge", "usr/lib/cni/host-local": "-> bridge", "opt/kiln/images/images.txt": "pause"})
	if err := os.Chmod(filepath.Join(src, "usr/local/bin/kubelet"), 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "extensions", "kiln-v1")
	var last int64
	if err := c.PushDir(context.Background(), host, src, dest, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	if got, want := listTree(t, dest), listTree(t, src); got != want {
		t.Errorf("pushed:\n%s\nwant:\n%s", got, want)
	}
	if last < 4*512 {
		t.Errorf("progress said %d bytes", last)
	}
	src2 := tree(t, map[string]string{"usr/local/bin/kubelet": "kubelet 2"})
	if err := c.PushDir(context.Background(), host, src2, dest, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := listTree(t, dest), listTree(t, src2); got != want {
		t.Errorf("pushed again:\n%s\nwant:\n%s", got, want)
	}
	// A push cancelled after its first bytes (kiln killed in the middle):
	// the host keeps what it had, and nothing of the cut stream.
	big := tree(t, map[string]string{"a": strings.Repeat("x", 1<<20), "b": strings.Repeat("y", 1<<20)})
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.PushDir(ctx, host, big, dest, func(int64) { cancel() }); err == nil {
		t.Error("a cancelled push returned no error")
	}
	cancel()
	// The host's side of the cut push ends by itself: wait for it, so
	// that nothing writes below dest once the test looks, or once its
	// directories are removed.
	srv.waitIdle(t, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(dest + ".kiln-tmp")
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut push left %s.kiln-tmp: %v", dest, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, want := listTree(t, dest), listTree(t, src2); got != want {
		t.Errorf("after a cut push:\n%s\nwant what was:\n%s", got, want)
	}
	for _, d := range []string{"relative/dir", "/", "/a/../b", "/it's"} {
		if err := c.PushDir(context.Background(), host, src, d, nil); err == nil || !strings.Contains(err.Error(), "not a clean absolute path") {
			t.Errorf("push to %q: %v", d, err)
		}
	}
}

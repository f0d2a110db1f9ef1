package machine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestImportImageArgv(t *testing.T) {
	got := importImageArgv("/var/lib/containerd/kiln-import/archive-00.tar")
	want := []string{"ctr", "--namespace", "k8s.io", "images", "import", "/var/lib/containerd/kiln-import/archive-00.tar"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv = %q, want %q", got, want)
	}
	// The staging directory is inside a plain host directory bound into the
	// machine, so the host path computed from it is seen by ctr.
	if !strings.HasPrefix(importDir, containerdRoot+"/") || !slices.Contains(hostBinds, containerdRoot) {
		t.Errorf("import dir %s is not below a host bind (%v)", importDir, hostBinds)
	}
}

func TestStageFile(t *testing.T) {
	src := filepath.Join(t.TempDir(), "images.tar")
	if err := os.WriteFile(src, []byte("archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bind-containerd", "kiln-import")
	a, err := stageFile(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := stageFile(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Dir(a) != dir || !strings.HasSuffix(a, ".tar") {
		t.Errorf("staged as %s and %s in %s", a, b, dir)
	}
	if data, _ := os.ReadFile(a); string(data) != "archive" {
		t.Errorf("staged content %q", data)
	}
	if st, _ := os.Stat(dir); st == nil || st.Mode().Perm() != 0o700 {
		t.Errorf("staging dir mode %v, want 0700", st)
	}
	// Removing the staged file leaves the user's archive.
	os.Remove(a)
	if _, err := os.Stat(src); err != nil {
		t.Errorf("source gone after removing the staged copy: %v", err)
	}

	if _, err := stageFile(filepath.Join(t.TempDir(), "missing.tar"), dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing source: %v", err)
	}
	if _, err := stageFile(t.TempDir(), dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory as source: %v", err)
	}
}

func TestImportImageArchiveNeedsRunningMachine(t *testing.T) {
	m, run := newTestManager(t)
	err := m.ImportImageArchive(context.Background(), "demo-worker-0", "/tmp/images.tar")
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("absent machine: %v", err)
	}
	for _, c := range joined(run.calls) {
		if strings.Contains(c, "nsenter") || strings.Contains(c, "ctr") {
			t.Errorf("ran %q for an absent machine", c)
		}
	}
}

// TestWhileRestarting: an import that fails because containerd restarts
// (as a node's does when its pod network is configured) is run again
// until it works; any other failure, and one past the limit, ends it.
func TestWhileRestarting(t *testing.T) {
	restarting := errors.New(`exit status 1: ctr: error reading from server: EOF`)
	// containerd 2's ctr, run in the second of a restart (CI, stop 34).
	gone := errors.New(`exit status 1: ctr: cannot access socket /run/containerd/containerd.sock: stat /run/containerd/containerd.sock: no such file or directory`)
	refused := errors.New(`exit status 1: ctr: image "x" is not a valid archive`)
	for _, tt := range []struct {
		name      string
		errs      []error // what each run returns, then nil
		within    time.Duration
		wantRuns  int
		wantError error
	}{
		{"containerd restarting twice, then the import works", []error{restarting, restarting}, time.Minute, 3, nil},
		{"containerd's socket gone while it restarts, then the import works", []error{gone, restarting}, time.Minute, 3, nil},
		{"an archive containerd refuses", []error{refused, restarting}, time.Minute, 1, refused},
		{"containerd away for longer than the limit", []error{restarting, restarting, restarting}, 0, 1, restarting},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runs := 0
			err := whileRestarting(context.Background(), tt.within, time.Millisecond, func() error {
				runs++
				if runs <= len(tt.errs) {
					return tt.errs[runs-1]
				}
				return nil
			})
			if runs != tt.wantRuns || err != tt.wantError {
				t.Errorf("%d runs, error %v; want %d runs, error %v", runs, err, tt.wantRuns, tt.wantError)
			}
		})
	}
}

func TestStageTree(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"kubelet", "etcd.tar"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(t.TempDir(), "bind-releases")
	files := map[string]string{"usr/local/bin/kubelet": filepath.Join(src, "kubelet"), "usr/share/kiln/images/etcd.tar": filepath.Join(src, "etcd.tar")}
	if err := stageTree(root, "v1.36.3", files); err != nil {
		t.Fatal(err)
	}
	for rel, from := range files {
		data, err := os.ReadFile(filepath.Join(root, "v1.36.3", rel))
		if err != nil || string(data) != filepath.Base(from) {
			t.Errorf("%s: %q, %v", rel, data, err)
		}
	}
	// A tree there already is left as it is; no temporary tree is left.
	if err := stageTree(root, "v1.36.3", map[string]string{"other": filepath.Join(src, "kubelet")}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 || ents[0].Name() != "v1.36.3" {
		t.Errorf("entries of the staging root: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(root, "v1.36.3", "other")); err == nil {
		t.Error("a staged tree was changed")
	}
	// A source missing or a path outside the tree: nothing is staged.
	for name, f := range map[string]map[string]string{
		"missing": {"kubelet": filepath.Join(src, "missing")},
		"outside": {"../escape": filepath.Join(src, "kubelet")},
	} {
		if err := stageTree(root, name, f); err == nil {
			t.Errorf("%s: staged", name)
		}
		if _, err := os.Stat(filepath.Join(root, name)); err == nil {
			t.Errorf("%s: a tree is there", name)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "..", "escape")); err == nil {
		t.Error("a file was written outside the tree")
	}
}

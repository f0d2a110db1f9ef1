package etcdmember

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// writeTree creates files (path relative to root: content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns every regular file under root: relative path to content.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nullLog returns a logger that discards everything.
func nullLog() *logrus.Logger {
	l, _ := logtest.NewNullLogger()
	return l
}

// equalTrees compares two readTree results.
func equalTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s is missing", p)
		} else if g != w {
			t.Errorf("%s = %q, want %q", p, g, w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected file %s", p)
		}
	}
}

// TestActivateStaged checks that every staged static pod moves into the
// manifests folder, next to the etcd pod already there, that a folder in
// the staged folder is left alone, and that a second run changes nothing.
func TestActivateStaged(t *testing.T) {
	kube := t.TempDir()
	writeTree(t, kube, map[string]string{
		nodelayout.StaticPodsSubdir + "/" + etcdmembers.ManifestFile:  "etcd",
		nodelayout.StagedPodsSubdir + "/kube-apiserver.yaml":          "apiserver",
		nodelayout.StagedPodsSubdir + "/kube-controller-manager.yaml": "kcm",
		nodelayout.StagedPodsSubdir + "/kube-scheduler.yaml":          "scheduler",
		nodelayout.StagedPodsSubdir + "/nested/ignored.yaml":          "nested",
	})
	log, hook := logtest.NewNullLogger()
	if err := ActivateStaged(kube, log); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		nodelayout.StaticPodsSubdir + "/" + etcdmembers.ManifestFile:  "etcd",
		nodelayout.StaticPodsSubdir + "/kube-apiserver.yaml":          "apiserver",
		nodelayout.StaticPodsSubdir + "/kube-controller-manager.yaml": "kcm",
		nodelayout.StaticPodsSubdir + "/kube-scheduler.yaml":          "scheduler",
		nodelayout.StagedPodsSubdir + "/nested/ignored.yaml":          "nested",
	}
	equalTrees(t, readTree(t, kube), want)
	var logged []string
	for _, e := range hook.AllEntries() {
		logged = append(logged, e.Message)
	}
	wantLog := []string{
		"activated static pod kube-apiserver.yaml",
		"activated static pod kube-controller-manager.yaml",
		"activated static pod kube-scheduler.yaml",
	}
	if !slices.Equal(logged, wantLog) {
		t.Errorf("logged %q, want %q", logged, wantLog)
	}

	hook.Reset()
	if err := ActivateStaged(kube, log); err != nil {
		t.Fatalf("second run: %v", err)
	}
	equalTrees(t, readTree(t, kube), want)
	if n := len(hook.AllEntries()); n != 0 {
		t.Errorf("second run logged %d lines, want none", n)
	}
}

// TestActivateStagedPartial covers the states a run interrupted half-way
// (or a missing folder) leaves behind.
func TestActivateStagedPartial(t *testing.T) {
	t.Run("no staged folder", func(t *testing.T) {
		kube := t.TempDir()
		writeTree(t, kube, map[string]string{nodelayout.StaticPodsSubdir + "/" + etcdmembers.ManifestFile: "etcd"})
		if err := ActivateStaged(kube, nullLog()); err != nil {
			t.Fatal(err)
		}
		equalTrees(t, readTree(t, kube), map[string]string{nodelayout.StaticPodsSubdir + "/" + etcdmembers.ManifestFile: "etcd"})
	})
	t.Run("some already moved", func(t *testing.T) {
		// A run stopped after moving one file: the next run moves the rest.
		kube := t.TempDir()
		writeTree(t, kube, map[string]string{
			nodelayout.StaticPodsSubdir + "/kube-apiserver.yaml": "apiserver",
			nodelayout.StagedPodsSubdir + "/kube-scheduler.yaml": "scheduler",
		})
		if err := ActivateStaged(kube, nullLog()); err != nil {
			t.Fatal(err)
		}
		equalTrees(t, readTree(t, kube), map[string]string{
			nodelayout.StaticPodsSubdir + "/kube-apiserver.yaml": "apiserver",
			nodelayout.StaticPodsSubdir + "/kube-scheduler.yaml": "scheduler",
		})
	})
	t.Run("staged again", func(t *testing.T) {
		// A staged file that is also active replaces the active one.
		kube := t.TempDir()
		writeTree(t, kube, map[string]string{
			nodelayout.StaticPodsSubdir + "/kube-apiserver.yaml": "old",
			nodelayout.StagedPodsSubdir + "/kube-apiserver.yaml": "new",
		})
		if err := ActivateStaged(kube, nullLog()); err != nil {
			t.Fatal(err)
		}
		equalTrees(t, readTree(t, kube), map[string]string{nodelayout.StaticPodsSubdir + "/kube-apiserver.yaml": "new"})
	})
	t.Run("no manifests folder", func(t *testing.T) {
		// Install creates the manifests folder (it writes the etcd pod there
		// first); without it nothing moves and the staged file is kept.
		kube := t.TempDir()
		writeTree(t, kube, map[string]string{nodelayout.StagedPodsSubdir + "/kube-apiserver.yaml": "apiserver"})
		err := ActivateStaged(kube, nullLog())
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("error %v, want one wrapping fs.ErrNotExist", err)
		}
		equalTrees(t, readTree(t, kube), map[string]string{nodelayout.StagedPodsSubdir + "/kube-apiserver.yaml": "apiserver"})
	})
	t.Run("staged folder unreadable", func(t *testing.T) {
		// A file where the staged folder should be is an error, not "nothing staged".
		kube := t.TempDir()
		writeTree(t, kube, map[string]string{nodelayout.StagedPodsSubdir: "not a folder"})
		if err := ActivateStaged(kube, nullLog()); err == nil {
			t.Fatal("no error for a staged folder that is a file")
		}
	})
}

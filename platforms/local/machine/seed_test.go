package machine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// TestUnshareMutable links an image's containerd root into a machine's
// directory as `cp -a --link` does, then checks that only content blobs and
// snapshot trees stay shared.
func TestUnshareMutable(t *testing.T) {
	img, dir := t.TempDir(), t.TempDir()
	files := map[string]os.FileMode{
		"io.containerd.content.v1.content/blobs/sha256/ab12":              0o444,
		"io.containerd.snapshotter.v1.overlayfs/snapshots/3/fs/usr/bin/x": 0o755,
		"io.containerd.snapshotter.v1.overlayfs/metadata.db":              0o600,
		"io.containerd.metadata.v1.bolt/meta.db":                          0o644,
		"io.containerd.content.v1.content/ingest/x/data":                  0o644,
	}
	for rel, mode := range files {
		for _, root := range []string{img, dir} {
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		src := filepath.Join(img, rel)
		if err := os.WriteFile(src, []byte("data of "+rel), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(src, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(src, filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unshareMutable(dir); err != nil {
		t.Fatal(err)
	}
	for rel, mode := range files {
		src, dst := filepath.Join(img, rel), filepath.Join(dir, rel)
		wantShared := strings.HasPrefix(rel, "io.containerd.content.v1.content/blobs/") ||
			strings.HasPrefix(rel, "io.containerd.snapshotter.v1.overlayfs/snapshots/")
		if got := inode(t, src) == inode(t, dst); got != wantShared {
			t.Errorf("%s: shared = %v, want %v", rel, got, wantShared)
		}
		data, err := os.ReadFile(dst)
		if err != nil || string(data) != "data of "+rel {
			t.Errorf("%s: content %q, %v", rel, data, err)
		}
		info, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s: mode %o, want %o", rel, info.Mode().Perm(), mode)
		}
	}
	// A write to the machine's database leaves the image's alone.
	db := "io.containerd.metadata.v1.bolt/meta.db"
	if err := os.WriteFile(filepath.Join(dir, db), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(img, db)); string(data) != "data of "+db {
		t.Errorf("the image's database changed: %q", data)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "io.containerd.metadata.v1.bolt", "*")); len(ents) != 1 {
		t.Errorf("left temporary files: %q", ents)
	}
}

func TestSeedBindDir(t *testing.T) {
	ctx := context.Background()
	img := t.TempDir()
	if err := os.WriteFile(filepath.Join(img, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("links", func(t *testing.T) {
		m, run := newTestManager(t)
		dir := filepath.Join(t.TempDir(), "bind-containerd")
		if err := m.seedBindDir(ctx, dir, img); err != nil {
			t.Fatal(err)
		}
		want := []string{strings.Join(linkTreeArgv(img, dir+".seeding"), " ")}
		if got := joined(run.calls); !slices.Equal(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			t.Errorf("the seeded directory is not in place: %v", err)
		}
		if _, err := os.Stat(dir + ".seeding"); err == nil {
			t.Error("the temporary directory is left")
		}
	})
	t.Run("a torn seed is started again", func(t *testing.T) {
		m, run := newTestManager(t)
		dir := filepath.Join(t.TempDir(), "bind-containerd")
		if err := os.MkdirAll(filepath.Join(dir+".seeding", "io.containerd.metadata.v1.bolt"), 0o755); err != nil {
			t.Fatal(err)
		}
		stale := filepath.Join(dir+".seeding", "io.containerd.metadata.v1.bolt", "meta.db")
		if err := os.WriteFile(stale, []byte("a link to the image's"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.seedBindDir(ctx, dir, img); err != nil {
			t.Fatal(err)
		}
		if len(run.calls) != 1 {
			t.Errorf("ran %q", joined(run.calls))
		}
		if _, err := os.Stat(filepath.Join(dir, "io.containerd.metadata.v1.bolt", "meta.db")); err == nil {
			t.Error("the torn seed's files were kept")
		}
	})
	t.Run("copies across file systems", func(t *testing.T) {
		m, run := newTestManager(t)
		dir := filepath.Join(t.TempDir(), "bind-containerd")
		tmp := dir + ".seeding"
		run.errs = map[string]error{strings.Join(linkTreeArgv(img, tmp), " "): errors.New("Invalid cross-device link")}
		if err := m.seedBindDir(ctx, dir, img); err != nil {
			t.Fatal(err)
		}
		want := []string{strings.Join(linkTreeArgv(img, tmp), " "), strings.Join(copyTreeArgv(img, tmp), " ")}
		if got := joined(run.calls); !slices.Equal(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			t.Errorf("no directory to copy into: %v", err)
		}
	})
	t.Run("existing directory kept", func(t *testing.T) {
		m, run := newTestManager(t)
		dir := t.TempDir()
		if err := m.seedBindDir(ctx, dir, img); err != nil {
			t.Fatal(err)
		}
		if len(run.calls) != 0 {
			t.Errorf("ran %q for a directory that exists", joined(run.calls))
		}
	})
	t.Run("empty image directory", func(t *testing.T) {
		m, run := newTestManager(t)
		dir := filepath.Join(t.TempDir(), "bind-kubelet")
		if err := m.seedBindDir(ctx, dir, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		if len(run.calls) != 0 {
			t.Errorf("ran %q for an empty image directory", joined(run.calls))
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			t.Errorf("no directory to bind: %v", err)
		}
	})
}

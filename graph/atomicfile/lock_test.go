package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLockExcludesAndWaits(t *testing.T) {
	root := t.TempDir()
	name := filepath.Join(root, "sub.lock")
	unlock, err := Lock(root, name)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v; want mode 0600", fi, err)
	}
	got := make(chan error, 1)
	go func() {
		// A second open file description: flock(2) excludes it as it
		// would another process.
		u, err := Lock(root, name)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a second Lock returned (%v) while the first held it", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Lock still waits after the first released it")
	}
}

func TestLockRefusesALink(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	// The lock file itself a link, and a directory on the way a link.
	if err := os.Symlink(filepath.Join(elsewhere, "target"), filepath.Join(root, "x.lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(root, "dir")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Join(root, "x.lock"), filepath.Join(root, "dir", "y.lock")} {
		if _, err := Lock(root, name); !errors.Is(err, ErrSymlink) {
			t.Errorf("Lock(%s): %v; want a *SymlinkError", name, err)
		}
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("Lock created %s in the links' target", ents[0].Name())
	}
}

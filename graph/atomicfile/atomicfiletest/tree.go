// Package atomicfiletest describes directory trees for tests that prove a
// run left a tree as it was, links and all.
package atomicfiletest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Tree describes every entry under root, root included, without following
// a symbolic link: its type and mode, and a regular file's content or a
// link's target. FIFOs and devices are described, never opened. Two calls
// compare equal (maps.Equal) when nothing under root changed.
func Tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(data)
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("describing %s: %v", root, err)
	}
	return out
}

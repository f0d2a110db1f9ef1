package graph_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// D10: a path that exists but is no regular file is an input error saying
// what it is (loaders would otherwise report "no such file"); only a path
// that is truly absent is fs.ErrNotExist. Persist refuses before writing.
func TestNonRegularFileIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		make  func(p string) error
		want  string
		isNil bool
	}{
		{name: "directory", make: func(p string) error { return os.Mkdir(p, 0o755) }, want: "b/b.txt is a directory"},
		{name: "FIFO", make: func(p string) error { return syscall.Mkfifo(p, 0o600) }, want: "b/b.txt is a named pipe (FIFO)"},
		{name: "dangling symlink", make: func(p string) error { return os.Symlink("nowhere", p) }, want: "b/b.txt is a symbolic link to nowhere; kiln never follows a symbolic link where it writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(filepath.Join(dir, "b", "b.txt")); err != nil {
				t.Fatal(err)
			}
			ctx, _ := withHooks(t)
			s, _ := open(t, dir)
			err := s.Persist(ctx, nonceTarget())
			if graph.KindOf(err) != graph.KindInput || !strings.Contains(err.Error(), tc.want) || errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Persist = %v; want an input error saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
				t.Error("a.txt was written although b/b.txt was refused")
			}
		})
	}
}

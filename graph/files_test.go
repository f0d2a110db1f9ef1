package graph_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

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
			if !graph.IsInputError(err) || !strings.Contains(err.Error(), tc.want) || errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Persist = %v; want an input error saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
				t.Error("a.txt was written although b/b.txt was refused")
			}
		})
	}
}

// globAsset lists in/* and reads each file it finds, as UserManifests does
// with manifests/.
type globAsset struct {
	Names []string `json:"names"`
}

func (*globAsset) ID() string                                    { return "glob" }
func (*globAsset) Name() string                                  { return "glob" }
func (*globAsset) Dependencies() []graph.Asset                   { return nil }
func (*globAsset) Generate(context.Context, graph.Parents) error { return nil }
func (*globAsset) Files() []*graph.File                          { return nil }

func (g *globAsset) Load(f graph.FileFetcher) (bool, error) {
	names, err := f.Names("in/*")
	if err != nil || len(names) == 0 {
		return false, err
	}
	for _, n := range names {
		if _, err := f.FetchByName(n); err != nil {
			return false, err
		}
	}
	g.Names = names
	return true, nil
}

// A file name that is not UTF-8 is bad input named with its bytes escaped,
// not an internal error.
func TestNonUTF8NameIsAnInputError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "in/ok.yaml", "x\n")
	writeFile(t, dir, "in/50-\xff\xfex.yaml", "x\n")
	s, _ := open(t, dir)
	err := s.Fetch(t.Context(), &globAsset{})
	var ne *graph.NameError
	if !graph.IsInputError(err) || !errors.As(err, &ne) || ne.Path != "in/50-\xff\xfex.yaml" {
		t.Fatalf("Fetch = %v; want an input error naming in/50-\\xff\\xfex.yaml", err)
	}
	if want := `"in/50-\xff\xfex.yaml": the file name is not valid UTF-8`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if !utf8.ValidString(err.Error()) {
		t.Errorf("the message itself is not UTF-8: %q", err)
	}
}

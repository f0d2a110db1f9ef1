package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/graph/atomicfile/atomicfiletest"
)

// linkedRoot is a root directory with symbolic links planted in it, all
// pointing into outside, a directory with one precious file.
type linkedRoot struct {
	root, outside string
}

// newLinkedRoot makes root/real/ (a directory), root/file (a file) and these
// links: root/ldir -> outside, root/real/ldir -> outside, root/lfile ->
// outside/precious, root/dangling -> outside/new, root/rel -> ../outside
// (relative), and root/.kiln-tmp-x in outside via ldir.
func newLinkedRoot(t *testing.T) linkedRoot {
	t.Helper()
	area := t.TempDir()
	l := linkedRoot{root: filepath.Join(area, "root"), outside: filepath.Join(area, "outside")}
	for _, d := range []string{l.root, l.outside, filepath.Join(l.root, "real")} {
		must(t, os.Mkdir(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(l.outside, "precious"), []byte("precious"), 0o640))
	must(t, os.WriteFile(filepath.Join(l.outside, TempPrefix+"precious"), []byte("not kiln's"), 0o640))
	must(t, os.WriteFile(filepath.Join(l.root, "file"), []byte("mine"), 0o644))
	for link, target := range map[string]string{
		"ldir": l.outside, "real/ldir": l.outside, "lfile": filepath.Join(l.outside, "precious"),
		"dangling": filepath.Join(l.outside, "new"), "rel": "../outside",
	} {
		must(t, os.Symlink(target, filepath.Join(l.root, link)))
	}
	return l
}

// in returns the name of p below the root.
func (l linkedRoot) in(p string) string { return filepath.Join(l.root, filepath.FromSlash(p)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// resolver is one of the two ways names are resolved: openat2, and one
// component at a time as on kernels without it.
type resolver struct {
	name     string
	fallback bool
}

// resolvers returns both resolvers.
func resolvers() []resolver { return []resolver{{"openat2", false}, {"openat-walk", true}} }

// TestWriterRefusesSymlinks runs every Writer operation on a name with a
// symbolic link as its last component, as a directory on the way, and
// through "..": each is refused with a *SymlinkError naming the link (or
// ErrOutsideRoot), nothing outside the root changes, and no temporary file
// is left.
func TestWriterRefusesSymlinks(t *testing.T) {
	write := func(w *Writer, name string) error { return w.Write(name, []byte("evil"), 0o777) }
	batchWrite := func(w *Writer, name string) error {
		b := w.Batch()
		defer b.Abort()
		if err := b.Write(name, []byte("evil"), 0o777); err != nil {
			return err
		}
		return b.Commit()
	}
	batchRemove := func(w *Writer, name string) error {
		b := w.Batch()
		defer b.Abort()
		if err := b.Remove(name); err != nil {
			return err
		}
		return b.Commit()
	}
	produce := func(w *Writer, name string) error {
		return w.Produce(name, 0o777, func(tmp string) error { return os.WriteFile(tmp, []byte("evil"), 0o777) })
	}
	mkdir := func(w *Writer, name string) error { return w.MkdirAll(name, 0o777) }
	ops := map[string]func(*Writer, string) error{
		"Write": write, "Batch.Write": batchWrite, "Produce": produce, "MkdirAll": mkdir,
		"Remove":       func(w *Writer, name string) error { return w.Remove(name) },
		"RemoveAll":    func(w *Writer, name string) error { return w.RemoveAll(name) },
		"Batch.Remove": batchRemove,
	}
	cases := []struct {
		name string
		// ops are those of ops to run; nil runs them all.
		ops []string
		// link is the link the error names, below the root; "" for a
		// name outside the root.
		path, link string
	}{
		{name: "link as last component", path: "lfile", link: "lfile",
			ops: []string{"Write", "Batch.Write", "Produce", "MkdirAll"}},
		{name: "dangling link as last component", path: "dangling", link: "dangling",
			ops: []string{"Write", "Batch.Write", "Produce", "MkdirAll"}},
		{name: "link to a directory as last component", path: "ldir", link: "ldir",
			ops: []string{"Write", "Batch.Write", "MkdirAll"}},
		{name: "link as directory", path: "ldir/precious", link: "ldir"},
		{name: "link as directory of a new file", path: "ldir/new/deeper", link: "ldir"},
		{name: "relative link as directory", path: "rel/precious", link: "rel"},
		{name: "link as a deeper directory", path: "real/ldir/precious", link: "real/ldir"},
		{name: "temporary file name in a linked directory", path: "ldir/" + TempPrefix + "precious", link: "ldir"},
		{name: "dot-dot out of the root", path: "../outside/precious"},
		{name: "dot-dot out through a directory", path: "real/../../outside/new"},
	}
	for _, r := range resolvers() {
		for _, tc := range cases {
			names := tc.ops
			if names == nil {
				names = slices.Sorted(maps.Keys(ops))
			}
			for _, op := range names {
				t.Run(fmt.Sprintf("%s/%s/%s", r.name, tc.name, op), func(t *testing.T) {
					l := newLinkedRoot(t)
					before := atomicfiletest.Tree(t, filepath.Dir(l.root))
					w := &Writer{Root: l.root, fallback: r.fallback}
					err := ops[op](w, l.in(tc.path))
					if tc.link == "" {
						if !errors.Is(err, ErrOutsideRoot) {
							t.Errorf("err = %v, want ErrOutsideRoot", err)
						}
					} else {
						var se *SymlinkError
						if !errors.As(err, &se) || se.Path != l.in(tc.link) || !errors.Is(err, ErrSymlink) {
							t.Fatalf("err = %v, want a *SymlinkError for %s", err, l.in(tc.link))
						}
						if !strings.Contains(err.Error(), l.in(tc.link)+" is a symbolic link to ") {
							t.Errorf("message %q does not name the link", err)
						}
					}
					if after := atomicfiletest.Tree(t, filepath.Dir(l.root)); !maps.Equal(before, after) {
						t.Errorf("files changed:\nbefore %v\nafter  %v", before, after)
					}
				})
			}
		}
	}
}

// TestWriterRemovesLinksNotTargets: removing a link removes the link
// itself, and RemoveAll of a directory holding links leaves their targets
// alone.
func TestWriterRemovesLinksNotTargets(t *testing.T) {
	for _, r := range resolvers() {
		t.Run(r.name, func(t *testing.T) {
			l := newLinkedRoot(t)
			outside := atomicfiletest.Tree(t, l.outside)
			w := &Writer{Root: l.root, fallback: r.fallback}
			must(t, w.Remove(l.in("lfile")))
			if _, err := os.Lstat(l.in("lfile")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the link lfile is still there: %v", err)
			}
			must(t, w.RemoveAll(l.in("real")))
			must(t, w.RemoveAll(l.in("ldir")))
			for _, p := range []string{"real", "ldir"} {
				if _, err := os.Lstat(l.in(p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s is still there: %v", p, err)
				}
			}
			if got := atomicfiletest.Tree(t, l.outside); !maps.Equal(outside, got) {
				t.Errorf("the links' targets changed:\nbefore %v\nafter  %v", outside, got)
			}
			if err := w.RemoveAll(l.root); !errors.Is(err, ErrOutsideRoot) {
				t.Errorf("RemoveAll of the root itself: %v, want ErrOutsideRoot", err)
			}
		})
	}
}

// TestTempsSkipsLinkedDirectories: temporary files are found only where
// the writer could have written them, never through a link.
func TestTempsSkipsLinkedDirectories(t *testing.T) {
	for _, r := range resolvers() {
		t.Run(r.name, func(t *testing.T) {
			l := newLinkedRoot(t)
			mine := l.in("real/" + TempPrefix + "f-1")
			must(t, os.WriteFile(mine, nil, 0o600))
			w := &Writer{Root: l.root, fallback: r.fallback}
			for dir, want := range map[string][]string{"real": {mine}, "ldir": nil, "rel": nil, "real/ldir": nil, "missing": nil} {
				got, err := w.RemoveTemps(l.in(dir))
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("RemoveTemps(%s) = %v, %v; want %v", dir, got, err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(l.outside, TempPrefix+"precious")); err != nil {
				t.Errorf("a file outside the root was removed: %v", err)
			}
		})
	}
}

// TestOpenFileAndStatFollowNoLink covers the exported primitives: a link
// on the way or at the name is a *SymlinkError, and nothing is created
// through it.
func TestOpenFileAndStatFollowNoLink(t *testing.T) {
	cases := []struct {
		path, link string
	}{
		{"lfile", "lfile"}, {"dangling", "dangling"}, {"ldir/precious", "ldir"},
		{"ldir/new", "ldir"}, {"real/ldir/precious", "real/ldir"}, {"rel/precious", "rel"},
		{"file", ""}, {"real/new", ""},
	}
	for _, r := range resolvers() {
		for _, tc := range cases {
			t.Run(r.name+"/"+tc.path, func(t *testing.T) {
				l := newLinkedRoot(t)
				before := atomicfiletest.Tree(t, l.outside)
				f, oerr := openFile(l.root, l.in(tc.path), os.O_RDONLY|os.O_CREATE, 0o666, r.fallback)
				if f != nil {
					f.Close()
				}
				info, serr := stat(l.root, l.in(tc.path), r.fallback)
				for name, err := range map[string]error{"OpenFile": oerr, "Stat": serr} {
					var se *SymlinkError
					switch {
					case tc.link == "" && err != nil:
						t.Errorf("%s: %v", name, err)
					case tc.link != "" && (!errors.As(err, &se) || se.Path != l.in(tc.link)):
						t.Errorf("%s: err = %v, want a *SymlinkError for %s", name, err, tc.link)
					}
				}
				if tc.link == "" && info.Name() != filepath.Base(tc.path) {
					t.Errorf("Stat named %s", info.Name())
				}
				if after := atomicfiletest.Tree(t, l.outside); !maps.Equal(before, after) {
					t.Errorf("files outside changed:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	}
	l := newLinkedRoot(t)
	if err := CheckNoSymlink(l.root, l.in("real/missing/file")); err != nil {
		t.Errorf("CheckNoSymlink of a missing file: %v", err)
	}
	if err := CheckNoSymlink(l.root, l.in("ldir/missing")); !errors.Is(err, ErrSymlink) {
		t.Errorf("CheckNoSymlink through a link: %v", err)
	}
	if _, err := ReadFile(l.root, l.in("../outside/precious")); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("ReadFile outside the root: %v", err)
	}
}

// TestWriterRootedWritesAndRemoves is the ordinary case under a Root, in
// both resolvers: directories are created, files written with their mode,
// and a link below the root path itself (the root is followed as named).
func TestWriterRootedWritesAndRemoves(t *testing.T) {
	for _, r := range resolvers() {
		t.Run(r.name, func(t *testing.T) {
			area := t.TempDir()
			real := filepath.Join(area, "real")
			must(t, os.Mkdir(real, 0o755))
			root := filepath.Join(area, "root")
			must(t, os.Symlink(real, root)) // --dir given as a link
			w := &Writer{Root: root, fallback: r.fallback}
			name := filepath.Join(root, "a", "b", "f")
			must(t, w.Write(name, []byte("x"), 0o600))
			st, err := os.Stat(filepath.Join(real, "a", "b", "f"))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("written file: %v %v", st, err)
			}
			must(t, w.MkdirAll(filepath.Join(root, "c", "d"), 0o700))
			if st, err := os.Stat(filepath.Join(real, "c")); err != nil || !st.IsDir() {
				t.Errorf("MkdirAll: %v", err)
			}
			must(t, w.Remove(name))
			must(t, w.RemoveAll(filepath.Join(root, "a")))
			must(t, w.Remove(filepath.Join(root, "missing", "f")))
			if _, err := os.Stat(filepath.Join(real, "a")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a is still there: %v", err)
			}
			assertNoTemps(t, real)
		})
	}
}

// TestWriterWithoutRootReplacesALink: without a Root (a machine's root file
// system, the cache) a link at the name written is replaced by the file,
// and what it pointed to is left alone; a directory the write creates is
// never a link.
func TestWriterWithoutRootReplacesALink(t *testing.T) {
	for _, r := range resolvers() {
		t.Run(r.name, func(t *testing.T) {
			l := newLinkedRoot(t)
			outside := atomicfiletest.Tree(t, l.outside)
			w := &Writer{fallback: r.fallback}
			must(t, w.Write(l.in("lfile"), []byte("new"), 0o644))
			if st, err := os.Lstat(l.in("lfile")); err != nil || !st.Mode().IsRegular() {
				t.Errorf("lfile is not a regular file: %v %v", st, err)
			}
			must(t, w.Write(l.in("real/new/f"), []byte("new"), 0o644))
			if got := atomicfiletest.Tree(t, l.outside); !maps.Equal(outside, got) {
				t.Errorf("the link's target changed:\nbefore %v\nafter  %v", outside, got)
			}
		})
	}
}

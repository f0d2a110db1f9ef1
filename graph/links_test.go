package graph_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/atomicfile/atomicfiletest"
	"github.com/kiln-project/kiln/graph/installdir"
)

// outsideDir is a directory outside --dir that planted links point into:
// a precious file, a state file readable by all, and a file named like a
// kiln temporary file.
func outsideDir(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	for name, data := range map[string]string{
		"precious":                      "precious\n",
		"state.json":                    `{"version": 1, "assets": {}}` + "\n",
		atomicfile.TempPrefix + "x-123": "not kiln's\n",
	} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// persist opens dir's store and persists tgt.
func persist(t *testing.T, dir string, tgt graph.Target, opts ...graph.Option) error {
	t.Helper()
	ctx, _ := withHooks(t)
	s, err := graph.Open(dir, opts...)
	if err != nil {
		return err
	}
	return s.Persist(ctx, tgt)
}

// TestSymlinksInDirAreRefused plants a symbolic link, pointing outside
// --dir, at each kind of path the store writes, chmods or removes: a
// directory of an output, an output itself, the state file, the journal,
// the consumed-files directory, the lock file, and a planted journal whose
// write goes through a linked directory. Each run is refused with a
// *atomicfile.SymlinkError naming the link, nothing outside --dir changes
// (content, mode or new files), and --dir is left as it was.
func TestSymlinksInDirAreRefused(t *testing.T) {
	firstRun := func(t *testing.T, dir string) {
		if err := persist(t, dir, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		// prepare runs kiln on dir first, if set.
		prepare func(t *testing.T, dir string)
		// plant makes the link (and any file) in dir pointing into out.
		plant func(t *testing.T, dir, out string)
		run   func(t *testing.T, dir string) error
		// link is the path of the link the error names, below dir.
		link string
		// also must be in the message.
		also string
		// input says the store itself reports the error as a *graph.InputError
		// (files it loads); the rest the commands map by their
		// *atomicfile.SymlinkError.
		input bool
	}{
		{name: "directory of an output", link: "b", input: true,
			plant: func(t *testing.T, dir, out string) { symlink(t, out, filepath.Join(dir, "b")) },
			run:   func(t *testing.T, dir string) error { return persist(t, dir, nonceTarget()) }},
		{name: "output file", link: "b/b.txt", input: true,
			plant: func(t *testing.T, dir, out string) {
				symlink(t, filepath.Join(out, "precious"), filepath.Join(dir, "b", "b.txt"))
			},
			run: func(t *testing.T, dir string) error { return persist(t, dir, nonceTarget()) }},
		{name: "output file kiln wrote before", link: "manifests/m.yaml", input: true, prepare: firstRun,
			plant: func(t *testing.T, dir, out string) {
				if err := os.Remove(filepath.Join(dir, "manifests", "m.yaml")); err != nil {
					t.Fatal(err)
				}
				symlink(t, filepath.Join(out, "precious"), filepath.Join(dir, "manifests", "m.yaml"))
			},
			run: func(t *testing.T, dir string) error {
				return persist(t, dir, target(&fileAsset[sIC]{}, &fileAsset[sMan]{}))
			}},
		{name: "state file (kiln show chmods it)", link: installdir.State,
			plant: func(t *testing.T, dir, out string) {
				symlink(t, filepath.Join(out, "state.json"), filepath.Join(dir, installdir.State))
			},
			run: func(t *testing.T, dir string) error { _, err := graph.Open(dir); return err }},
		{name: "journal", link: installdir.Journal,
			plant: func(t *testing.T, dir, out string) {
				symlink(t, filepath.Join(out, "precious"), filepath.Join(dir, installdir.Journal))
			},
			run: func(t *testing.T, dir string) error { _, err := graph.Open(dir); return err }},
		{name: "planted journal writing through a linked directory", link: "x", also: installdir.Journal,
			plant: func(t *testing.T, dir, out string) {
				j := fmt.Sprintf(`{"version": 1, "target": "t", "started": "2025-01-02T03:04:05Z",
					"writes": [{"path": "x/evil", "mode": 511, "data": "ZXZpbAo="}], "state": %s}`, `{"version": 1, "assets": {}}`)
				if err := os.WriteFile(filepath.Join(dir, installdir.Journal), []byte(j), 0o600); err != nil {
					t.Fatal(err)
				}
				symlink(t, out, filepath.Join(dir, "x"))
			},
			run: func(t *testing.T, dir string) error { _, err := graph.Open(dir); return err }},
		{name: "consumed-files directory", link: ".kiln", prepare: firstRun,
			plant: func(t *testing.T, dir, out string) { symlink(t, out, filepath.Join(dir, ".kiln")) },
			run:   func(t *testing.T, dir string) error { return persist(t, dir, target(&fileAsset[sIgn]{})) }},
		{name: "lock file", link: installdir.Lock,
			plant: func(t *testing.T, dir, out string) {
				symlink(t, filepath.Join(out, "precious"), filepath.Join(dir, installdir.Lock))
			},
			run: func(t *testing.T, dir string) error {
				l, err := graph.LockDir(dir, "kiln test")
				if err == nil {
					l.Unlock()
				}
				return err
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, out := t.TempDir(), outsideDir(t)
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			tc.plant(t, dir, out)
			outBefore, dirBefore := atomicfiletest.Tree(t, out), atomicfiletest.Tree(t, dir)
			err := tc.run(t, dir)
			var se *atomicfile.SymlinkError
			if want := filepath.Join(dir, tc.link); !errors.As(err, &se) || se.Path != want {
				t.Fatalf("err = %v; want a *atomicfile.SymlinkError for %s", err, want)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, tc.link)+" is a symbolic link to ") || !strings.Contains(err.Error(), tc.also) {
				t.Errorf("message %q does not name the link (and %q)", err, tc.also)
			}
			if tc.input && !graph.IsInputError(err) {
				t.Errorf("%v: not an input error", err)
			}
			if after := atomicfiletest.Tree(t, out); !maps.Equal(outBefore, after) {
				t.Errorf("outside --dir changed:\nbefore %v\nafter  %v", outBefore, after)
			}
			if after := atomicfiletest.Tree(t, dir); !maps.Equal(dirBefore, after) {
				t.Errorf("--dir changed:\nbefore %v\nafter  %v", dirBefore, after)
			}
		})
	}
}

// TestSymlinkPlantedDuringAWriteIsRefused: a link planted after the run
// checked --dir, while it writes, is refused by the write itself: the
// store's writer opens every directory without following links.
func TestSymlinkPlantedDuringAWriteIsRefused(t *testing.T) {
	dir, out := t.TempDir(), outsideDir(t)
	outBefore := atomicfiletest.Tree(t, out)
	var once sync.Once
	plant := graph.WithFaults(func(op atomicfile.Op, p string) error {
		if op == atomicfile.OpCreate && filepath.Base(p) == "a.txt" {
			once.Do(func() { symlink(t, out, filepath.Join(dir, "b")) })
		}
		return nil
	})
	err := persist(t, dir, nonceTarget(), plant)
	var se *atomicfile.SymlinkError
	if !errors.As(err, &se) || se.Path != filepath.Join(dir, "b") {
		t.Fatalf("err = %v; want a *atomicfile.SymlinkError for %s", err, filepath.Join(dir, "b"))
	}
	if after := atomicfiletest.Tree(t, out); !maps.Equal(outBefore, after) {
		t.Errorf("outside --dir changed:\nbefore %v\nafter  %v", outBefore, after)
	}
}

// TestTempsBehindALinkAreNotSwept: Open removes the temporary files of
// interrupted writes, but never through a link: a directory named in the
// state that is now a link holds none of kiln's.
func TestTempsBehindALinkAreNotSwept(t *testing.T) {
	dir, out := t.TempDir(), outsideDir(t)
	if err := persist(t, dir, nonceTarget()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	symlink(t, out, filepath.Join(dir, "b"))
	before := atomicfiletest.Tree(t, out)
	if _, err := graph.Open(dir); err != nil {
		t.Fatal(err)
	}
	if after := atomicfiletest.Tree(t, out); !maps.Equal(before, after) {
		t.Errorf("Open swept files outside --dir:\nbefore %v\nafter  %v", before, after)
	}
}

// TestOneLinkIsReportedOnce: every asset that loads a file below a linked
// directory is refused for the same link, and the link is named once.
func TestOneLinkIsReportedOnce(t *testing.T) {
	dir, out := t.TempDir(), outsideDir(t)
	symlink(t, out, filepath.Join(dir, "b"))
	ctx, _ := withHooks(t)
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Two assets whose files are both below b/.
	err = s.Fetch(ctx, &fileAsset[sOutB]{}, &fileAsset[sOutB2]{})
	if n := strings.Count(fmt.Sprint(err), "is a symbolic link"); n != 1 || !graph.IsInputError(err) {
		t.Errorf("err = %v : the link is named %d times, want once, as an input error", err, n)
	}
}

type sOutB2 struct{}

func (sOutB2) id() string          { return "outB2" }
func (sOutB2) deps() []graph.Asset { return nil }
func (sOutB2) file() string        { return "b/b2.txt" }

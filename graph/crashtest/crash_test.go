package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/crashtest"
)

const installConfig = `apiVersion: kiln.dev/v1
metadata:
  name: dev
baseDomain: example.com
platform:
  none: {}
`

// crash is the panic value of a simulated kill: nothing after the
// operation runs, neither in the writer nor in the store.
type crash struct{}

// run opens dir's store and persists t; fault, if set, sees every file
// operation. A crash is reported as errCrashed.
func run(dir string, t graph.Target, fault func(atomicfile.Op, string) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r != (crash{}) {
				panic(r)
			}
			err = errCrashed
		}
	}()
	var opts []graph.Option
	if fault != nil {
		opts = append(opts, graph.WithFaults(fault))
	}
	s, err := graph.Open(dir, opts...)
	if err != nil {
		return err
	}
	if err := s.Persist(context.Background(), t); err != nil {
		return err
	}
	if g := s.Generated(); fault == nil && len(g) > 0 && t.Name == "check" {
		return fmt.Errorf("generated %v", g)
	}
	return nil
}

var errCrashed = errors.New("crashed")

// TestKillAnywhere interrupts `create manifests` and `create
// ignition-configs` at each of their file operations in turn (every mkdir,
// create, write, sync, rename, directory sync and remove), once by a kill and
// once by an I/O error (ENOSPC or EACCES), then runs the same command again
// and checks the directory converged: the run succeeds, a third run changes
// nothing, the files are those of an uninterrupted run, every certificate
// in every output chains to a CA in the state, and no temporary file,
// journal or lock file is left.
func TestKillAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each target a few hundred times")
	}
	if inconsistent := killAnywhere(t); inconsistent > 0 {
		t.Errorf("%d inconsistent directories", inconsistent)
	}
}

func killAnywhere(t *testing.T) (inconsistent int) {
	// Every point takes a few hundred milliseconds; by default every
	// fourth one is tried (each kind of operation still is, on various
	// files), KILN_CRASH_ALL=1 tries them all.
	stride := 4
	if os.Getenv("KILN_CRASH_ALL") != "" {
		stride = 1
	}
	fresh := t.TempDir()
	if err := os.WriteFile(filepath.Join(fresh, "install-config.yaml"), []byte(installConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	afterManifests := copyDir(t, fresh)
	if err := run(afterManifests, targets.Manifests(), nil); err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, c := range []struct {
		target func() graph.Target
		from   string
	}{{targets.Manifests, fresh}, {targets.IgnitionConfigs, afterManifests}} {
		tg := c.target()
		ref := copyDir(t, c.from)
		ops := 0
		if err := run(ref, tg, func(atomicfile.Op, string) error { ops++; return nil }); err != nil {
			t.Fatal(err)
		}
		want := fileSet(t, ref)
		t.Logf("%s: %d file operations", tg.Name, ops)
		for m, mode := range []string{"kill", "error"} {
			for n := 1 + m*stride/2; n <= ops; n += stride {
				points++
				dir := copyDir(t, c.from)
				count := 0
				var at string
				err := run(dir, c.target(), func(op atomicfile.Op, path string) error {
					if count++; count != n {
						return nil
					}
					at = fmt.Sprintf("%s %s", op, strings.TrimPrefix(path, dir+"/"))
					if mode == "kill" {
						panic(crash{})
					}
					if n%2 == 0 {
						return syscall.EACCES
					}
					return syscall.ENOSPC
				})
				if err == nil {
					t.Errorf("%s: %s at operation %d (%s): the run succeeded", tg.Name, mode, n, at)
				}
				if problem := converge(t, dir, c.target, want); problem != "" {
					inconsistent++
					t.Errorf("%s: %s at operation %d (%s; the interrupted run said %v): %s", tg.Name, mode, n, at, err, problem)
				}
			}
		}
	}
	t.Logf("%d interruption points, %d inconsistent directories", points, inconsistent)
	return inconsistent
}

// converge runs target in dir as the user would after an interruption and
// returns what is wrong with the result, or "".
func converge(t *testing.T, dir string, target func() graph.Target, want []string) string {
	if err := run(dir, target(), nil); err != nil {
		return fmt.Sprintf("the next run failed: %v", err)
	}
	s, err := graph.Open(dir)
	if err != nil {
		return err.Error()
	}
	if err := s.Persist(context.Background(), target()); err != nil {
		return fmt.Sprintf("a third run failed: %v", err)
	}
	if g := s.Generated(); len(g) > 0 {
		return fmt.Sprintf("a third run generated %v again", g)
	}
	if got := fileSet(t, dir); !slices.Equal(got, want) {
		return fmt.Sprintf("files %v, want those of an uninterrupted run %v", got, want)
	}
	// The manifests hold no certificates yet; the Ignition configs and
	// the kubeconfig do.
	return crashtest.CheckCerts(dir, len(want) > 0 && slices.Contains(want, "bootstrap.ign"))
}

// fileSet lists dir's files; a temporary file, a journal or a lock file is
// listed too, so it shows as a difference.
func fileSet(t *testing.T, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// copyDir copies dir (files and modes) into a new temporary directory.
func copyDir(t *testing.T, dir string) string {
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), info.Mode().Perm())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestBatchWritesRemovesAndSyncsEachDirectoryOnce(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := Write(old, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ops []string
	w := &Writer{Fault: func(op Op, path string) error {
		rel, _ := filepath.Rel(dir, path)
		ops = append(ops, string(op)+" "+rel)
		return nil
	}}
	b := w.Batch()
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"a", 0o644}, {"new/deeper/b", 0o600}, {"c", 0o600}} {
		if err := b.Write(filepath.Join(dir, f.name), []byte(f.name), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Remove(old); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Fatal("a is in place before Commit")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create a", "write a", "mkdir new/deeper", "create new/deeper/b", "write new/deeper/b", "create c", "write c",
		"remove old",
		"sync a", "sync new/deeper/b", "sync c",
		"rename a", "rename new/deeper/b", "rename c",
		// Each directory once: new and new/deeper were created, so their
		// parents hold new entries.
		"syncdir .", "syncdir new", "syncdir new/deeper",
	}
	if !slices.Equal(ops, want) {
		t.Errorf("operations\n%q\nwant\n%q", ops, want)
	}
	for name, mode := range map[string]os.FileMode{"a": 0o644, "new/deeper/b": 0o600, "c": 0o600} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		st, _ := os.Stat(filepath.Join(dir, name))
		if err != nil || string(data) != name || st.Mode().Perm() != mode {
			t.Errorf("%s: %q %v %v, want its name, mode %v", name, data, st.Mode().Perm(), err, mode)
		}
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old still exists: %v", err)
	}
	assertNoTemps(t, dir)
}

// TestBatchFaultAtEveryOperation fails, then crashes, a batch replacing two
// files at each operation in turn: every file holds its old or its new
// content; after a failure no temporary file is left, after a crash
// RemoveTemps sweeps them; a batch that finished has both new contents.
func TestBatchFaultAtEveryOperation(t *testing.T) {
	for _, mode := range []string{"error", "crash"} {
		for n := 1; ; n++ {
			dir := t.TempDir()
			names := []string{filepath.Join(dir, "f"), filepath.Join(dir, "sub", "g")}
			if err := Write(names[0], []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			w, ops := faultAt(n, mode)
			var err error
			survive(func() {
				b := w.Batch()
				defer b.Abort()
				for _, name := range names {
					if err = b.Write(name, []byte("new"), 0o600); err != nil {
						return
					}
				}
				err = b.Commit()
			})
			if *ops < n {
				if err != nil {
					t.Fatalf("%s: batch with %d operations: %v", mode, *ops, err)
				}
				for _, name := range names {
					if data, _ := os.ReadFile(name); string(data) != "new" {
						t.Errorf("%s: %q after the batch, want \"new\"", name, data)
					}
				}
				break
			}
			for _, name := range names {
				data, rerr := os.ReadFile(name)
				if string(data) != "old" && string(data) != "new" && !(errors.Is(rerr, os.ErrNotExist) && name == names[1]) {
					t.Errorf("%s at operation %d: %s holds %q", mode, n, name, data)
				}
			}
			if mode == "error" && err == nil {
				t.Errorf("error at operation %d: the batch succeeded", n)
			}
			for _, d := range []string{dir, filepath.Join(dir, "sub")} {
				if mode == "crash" {
					if _, err := RemoveTemps(d); err != nil {
						t.Fatal(err)
					}
				}
				assertNoTemps(t, d)
			}
		}
	}
}

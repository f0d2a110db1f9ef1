package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteCreatesParentsAndSetsMode(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a", "b", "secret")
	if err := Write(name, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	// Overwriting an existing file with a wider mode takes the new mode.
	if err := Write(name, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(name)
	st, _ = os.Stat(name)
	if string(data) != "two" || st.Mode().Perm() != 0o644 {
		t.Errorf("got %q %v, want \"two\" 0644", data, st.Mode().Perm())
	}
	assertNoTemps(t, filepath.Dir(name))
}

func TestWriteFuncFailureKeepsOldContentAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := Write(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFunc(name, 0o644, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	data, _ := os.ReadFile(name)
	if string(data) != "old" {
		t.Errorf("content %q after a failed write, want \"old\"", data)
	}
	assertNoTemps(t, dir)
}

func TestWriteIntoDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o644); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	assertNoTemps(t, dir)
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, TempPrefix+"state-123")
	if err := os.WriteFile(left, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != left {
		t.Errorf("removed %v, want [%s]", removed, left)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("RemoveTemps removed an ordinary file: %v", err)
	}
}

// crash is the panic value of a simulated kill in the fault tests.
type crash struct{}

// faultAt returns a writer whose n-th operation fails (mode "error") or
// crashes (mode "crash"), and the count of operations it saw.
func faultAt(n int, mode string) (*Writer, *int) {
	ops := new(int)
	return &Writer{Fault: func(Op, string) error {
		if *ops++; *ops < n {
			return nil
		}
		if mode == "crash" {
			panic(crash{})
		}
		return errors.New("injected")
	}}, ops
}

// survive runs fn, turning a simulated crash into a return.
func survive(fn func()) {
	defer func() {
		if r := recover(); r != nil && r != (crash{}) {
			panic(r)
		}
	}()
	fn()
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, TempPrefix+"*"))
	if len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// TestWriterFaultAtEveryOperation fails, then crashes, a write at each of its
// operations in turn: a failure leaves the old content and no temporary
// file; a crash leaves the old or the new content and at most temporary
// files, which RemoveTemps sweeps.
func TestWriterFaultAtEveryOperation(t *testing.T) {
	for _, mode := range []string{"error", "crash"} {
		for n := 1; ; n++ {
			dir := t.TempDir()
			name := filepath.Join(dir, "sub", "f")
			if err := Write(name, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			w, ops := faultAt(n, mode)
			var err error
			survive(func() { err = w.Write(name, []byte("new"), 0o600) })
			if *ops < n { // the write finished before operation n
				if err != nil || n < 5 {
					t.Fatalf("%s: write with %d operations: %v", mode, *ops, err)
				}
				break
			}
			data, _ := os.ReadFile(name)
			if string(data) != "old" && string(data) != "new" {
				t.Errorf("%s at operation %d: content %q", mode, n, data)
			}
			if mode == "error" {
				if err == nil {
					t.Errorf("error at operation %d: Write succeeded", n)
				}
				assertNoTemps(t, filepath.Dir(name))
				continue
			}
			if _, err := RemoveTemps(filepath.Dir(name)); err != nil {
				t.Fatal(err)
			}
			assertNoTemps(t, filepath.Dir(name))
		}
	}
}

func TestProduceRenamesWhatTheProgramWrote(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "bin", "tool")
	err := Produce(name, 0o755, func(tmp string) error {
		if filepath.Dir(tmp) != filepath.Dir(name) {
			t.Errorf("temporary file %s is not in %s", tmp, filepath.Dir(name))
		}
		// A program may replace the file rather than write into it.
		if err := os.Remove(tmp); err != nil {
			return err
		}
		return os.WriteFile(tmp, []byte("built"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(name)
	st, _ := os.Stat(name)
	if string(data) != "built" || st.Mode().Perm() != 0o755 {
		t.Errorf("got %q %v, want \"built\" 0755", data, st.Mode().Perm())
	}
	assertNoTemps(t, filepath.Dir(name))
}

func TestProduceFailureKeepsOldContentAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "tool")
	if err := Write(name, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Produce(name, 0o755, func(tmp string) error {
		os.WriteFile(tmp, []byte("half"), 0o644)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	data, _ := os.ReadFile(name)
	if string(data) != "old" {
		t.Errorf("content %q after a failed write, want \"old\"", data)
	}
	assertNoTemps(t, dir)
}

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

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, TempPrefix+"*"))
	if len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

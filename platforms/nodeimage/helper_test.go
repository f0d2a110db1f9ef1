package nodeimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// TestLocalPathHelper builds the local-path-helper of the
// local-path-provisioner wrapper module (it uses only the standard library)
// and runs it as the provisioner's helper pods do: create makes a
// world-writable directory, delete removes it with its content, and unsafe
// arguments are refused.
func TestLocalPathHelper(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	files := componentFiles(t, "local-path-provisioner")
	src, ok := files["local-path-helper/main.go"]
	if !ok {
		t.Fatalf("the wrapper module has no local-path-helper/main.go: %v", keys(files))
	}
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module helper\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "local-path-helper")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	base := t.TempDir()
	vol := filepath.Join(base, "pvc-1_default_data")
	if out, err := run("-p", vol, "-s", "1073741824", "-m", "Filesystem", "-a", "create"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if st, err := os.Stat(vol); err != nil || st.Mode().Perm() != 0o777 || !st.IsDir() {
		t.Fatalf("after create: %v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(vol, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("-p", vol, "-s", "0", "-m", "Filesystem", "-a", "delete"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("delete removed the parent: %v", err)
	}
	for _, bad := range [][]string{
		{"-p", "relative/dir", "-a", "create"},
		{"-p", "/", "-a", "delete"},
		{"-p", "/var", "-a", "delete"},
		{"-p", "/var/../etc", "-a", "delete"},
		{"-p", vol, "-m", "Block", "-a", "create"},
		{"-p", vol, "-a", "resize"},
		{"-p", vol, "-a", "create", "extra"},
	} {
		if out, err := run(bad...); err == nil || !strings.Contains(out, "local-path-helper:") {
			t.Errorf("%q: err = %v, output %q; want a refusal", bad, err, out)
		}
	}
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Errorf("a refused call created %s", vol)
	}
}

// componentNamed returns the default release's component named name.
func componentNamed(t *testing.T, name string) Component {
	t.Helper()
	for _, c := range Components(release.Default()) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no component %s", name)
	return Component{}
}

// componentFiles returns the rendered module of the component named name.
func componentFiles(t *testing.T, name string) map[string][]byte {
	t.Helper()
	files, err := componentNamed(t, name).Sources()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

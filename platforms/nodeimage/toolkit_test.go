package nodeimage

import (
	"path/filepath"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// TestNewToolkit checks the toolkit's defaults: the cache directory
// created, the default release, a logger and a progress reporter, and a
// missing Go toolchain reported by Go rather than refused.
func TestNewToolkit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	tk, err := NewToolkit(Options{CacheDir: dir, Go: filepath.Join(dir, "no-go")})
	if err != nil {
		t.Fatal(err)
	}
	if tk.CacheDir() != dir || !exists(dir) {
		t.Errorf("cache dir %s (exists: %v), want %s created", tk.CacheDir(), exists(dir), dir)
	}
	if tk.Release() != release.Default() {
		t.Errorf("release %s, want the default %s", tk.Release().Kubernetes, release.Default().Kubernetes)
	}
	if tk.Log() == nil || tk.Progress() == nil {
		t.Error("no default logger or progress reporter")
	}
	if _, _, err := tk.Go(); err == nil {
		t.Error("a go command that does not exist was taken")
	}
}

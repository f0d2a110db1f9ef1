package installdir

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every path is declared once, and what destroy removes is what Layout
// marks Removed, never the user's input, the lock or the debug log.
func TestLayout(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Layout() {
		if seen[e.Path] {
			t.Errorf("%s declared twice", e.Path)
		}
		seen[e.Path] = true
	}
	removed := RemovedByDestroy()
	for _, kept := range []string{InstallConfig, Lock, DebugLog, Consumed, Journal} {
		if slices.Contains(removed, kept) {
			t.Errorf("destroy removes %s", kept)
		}
	}
	for _, gone := range []string{State, Metadata, Ignition("bootstrap"), Auth, Terraform, Shape, Hosts, UpgradeSnapshots} {
		if !slices.Contains(removed, gone) {
			t.Errorf("destroy keeps %s", gone)
		}
	}
}

func TestCovers(t *testing.T) {
	for p, want := range map[string]bool{
		AdminKubeconfig:                          true,
		"auth":                                   true,
		"manifests/50-x.yaml":                    true,
		"log-bundle-20261202-101010.tar.gz":      true,
		"upgrade/etcd-20261202.db":               true,
		".kiln":                                  true,
		"authx":                                  false,
		"notes.txt":                              false,
		"sub/log-bundle-20261202.tar.gz":         false,
		".kiln/unknown.json":                     false,
		"static-pods/master/kube-apiserver.yaml": true,
	} {
		if got := Covers(p); got != want {
			t.Errorf("Covers(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestUndeclared(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{AdminKubeconfig, Shape, "notes.txt", ".kiln/unknown.json", LogBundlePrefix + "20261202-101010.tar.gz"} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Undeclared(dir)
	if want := []string{".kiln/unknown.json", "notes.txt"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Undeclared = %v, %v; want %v", got, err, want)
	}
}

package nodeimage

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/release"
)

// TestKubectl checks which cached kubectl is the pinned release's: one
// whose module requires that release (in either go.mod form), the newest
// of several; none is a *NotCachedError.
func TestKubectl(t *testing.T) {
	cache := t.TempDir()
	if _, err := Kubectl(cache, release.Default().Kubernetes); !errors.As(err, new(*NotCachedError)) {
		t.Fatalf("empty cache: %v, want a *NotCachedError", err)
	}
	entry := func(name, gomod string, kubectl bool, age time.Duration) string {
		dir := filepath.Join(cache, "components", name)
		if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "src", "go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "bin", "kubectl")
		if !kubectl {
			return bin
		}
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(bin, when, when); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	v := release.Default().Kubernetes
	entry("kubernetes-other", "module m\n\nrequire k8s.io/kubernetes v1.30.0\n", true, 0)
	entry("kubernetes-nobin", "module m\n\nrequire k8s.io/kubernetes "+v+"\n", false, 0)
	entry("etcd-x", "module m\n\nrequire k8s.io/kubernetes "+v+"\n", true, 0)
	if _, err := Kubectl(cache, release.Default().Kubernetes); !errors.As(err, new(*NotCachedError)) {
		t.Fatalf("no entry of the release: %v, want a *NotCachedError", err)
	}
	older := entry("kubernetes-older", "module m\n\nrequire (\n\tk8s.io/kubernetes "+v+"\n)\n", true, time.Hour)
	if got, err := Kubectl(cache, release.Default().Kubernetes); err != nil || got != older {
		t.Errorf("Kubectl = %q, %v; want %q (a require block)", got, err, older)
	}
	newer := entry("kubernetes-newer", "module m\n\nrequire k8s.io/kubernetes "+v+"\n", true, time.Minute)
	if got, err := Kubectl(cache, release.Default().Kubernetes); err != nil || got != newer {
		t.Errorf("Kubectl = %q, %v; want the newest %q", got, err, newer)
	}
}

// TestKubectlFromNodeImage: without a component entry, the kubectl of a
// cached node image of the pinned release serves (a host that has the
// image but never built it); an image of another release does not.
func TestKubectlFromNodeImage(t *testing.T) {
	cache := t.TempDir()
	image := func(name, kubernetes string) string {
		root := filepath.Join(cache, "images", name, "rootfs")
		for _, f := range []string{"usr/bin/systemctl", filepath.Join(release.BinDir, "kubectl")} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		rel := release.Default().Info()
		rel.Kubernetes = kubernetes
		meta, err := json.Marshal(Image{Hash: name, Release: rel})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, "images", name, metadataFile), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(root, release.BinDir, "kubectl")
	}
	image("node-other", "v1.30.0")
	if _, err := Kubectl(cache, release.Default().Kubernetes); !errors.As(err, new(*NotCachedError)) {
		t.Fatalf("image of another release: %v, want a *NotCachedError", err)
	}
	want := image("node-this", release.Default().Kubernetes)
	if got, err := Kubectl(cache, release.Default().Kubernetes); err != nil || got != want {
		t.Errorf("Kubectl = %q, %v; want the image's %q", got, err, want)
	}
}

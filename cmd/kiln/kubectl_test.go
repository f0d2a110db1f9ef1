package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// TestKubectlCommand checks what `kiln kubectl` runs, and that each
// missing piece is an input error (a missing kubectl a
// *nodeimage.NotCachedError).
func TestKubectlCommand(t *testing.T) {
	work := t.TempDir()
	cache, dir := filepath.Join(work, "cache"), filepath.Join(work, "d")
	getenv := func(k string) string {
		if k == "KILN_CACHE_DIR" {
			return cache
		}
		return ""
	}
	write := func(name, data string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	args, environ := []string{"get", "nodes"}, []string{"PATH=/bin", "KUBECONFIG=/x"}

	_, err := kubectlCommand(dir, getenv, environ, args)
	if exitcode.Of(err) != exitcode.Input {
		t.Errorf("no kubeconfig: %v, want an input error", err)
	}
	write(filepath.Join(dir, "auth", "kubeconfig"), "apiVersion: v1\n", 0o600)
	// metadata.json names the release: missing, unreadable or naming one
	// this kiln does not pin, it is an input error naming it.
	for _, meta := range []string{"", "{not json", `{"infraID": "d-abcde", "kubernetesVersion": "v1.20.0"}`} {
		if meta != "" {
			write(filepath.Join(dir, installdir.Metadata), meta, 0o644)
		}
		if _, err := kubectlCommand(dir, getenv, environ, args); exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), installdir.Metadata) {
			t.Errorf("metadata.json %q: %v, want an input error naming it", meta, err)
		}
	}
	// One without a release, from before kiln recorded it: the default's.
	write(filepath.Join(dir, installdir.Metadata), `{"infraID": "d-abcde"}`, 0o644)
	_, err = kubectlCommand(dir, getenv, environ, args)
	if exitcode.Of(err) != exitcode.Input || !errors.As(err, new(*nodeimage.NotCachedError)) {
		t.Errorf("no kubectl: %v, want an input error and a *nodeimage.NotCachedError", err)
	}
	entry := filepath.Join(cache, "components", "kubernetes-k")
	write(filepath.Join(entry, "src", "go.mod"), "module m\n\nrequire k8s.io/kubernetes "+release.Default().Kubernetes+"\n", 0o644)
	write(filepath.Join(entry, "bin", "kubectl"), "#!/bin/sh\n", 0o755)
	c, err := kubectlCommand(dir, getenv, environ, args)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(entry, "bin", "kubectl")
	if c.Path != bin || !slices.Equal(c.Argv, []string{bin, "get", "nodes"}) ||
		!slices.Equal(c.Env, []string{"PATH=/bin", "KUBECONFIG=" + filepath.Join(dir, "auth", "kubeconfig")}) {
		t.Errorf("kubectlCommand = %+v", c)
	}

	// A cluster whose metadata.json names the older release gets that
	// release's kubectl, and none while only the default's is cached.
	write(filepath.Join(dir, installdir.Metadata), `{"infraID": "d-abcde", "kubernetesVersion": "v1.35.4"}`, 0o644)
	if _, err := kubectlCommand(dir, getenv, environ, args); !errors.As(err, new(*nodeimage.NotCachedError)) {
		t.Errorf("a v1.35.4 cluster with only %s's kubectl cached: %v, want a *nodeimage.NotCachedError", release.Default().Kubernetes, err)
	}
	older := filepath.Join(cache, "components", "kubernetes-older")
	write(filepath.Join(older, "src", "go.mod"), "module m\n\nrequire k8s.io/kubernetes v1.35.4\n", 0o644)
	write(filepath.Join(older, "bin", "kubectl"), "#!/bin/sh\n", 0o755)
	if c, err := kubectlCommand(dir, getenv, environ, args); err != nil || c.Path != filepath.Join(older, "bin", "kubectl") {
		t.Errorf("a v1.35.4 cluster runs %q (%v), want %s", c.Path, err, filepath.Join(older, "bin", "kubectl"))
	}
}

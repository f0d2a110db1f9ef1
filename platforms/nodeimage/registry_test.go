package nodeimage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// TestRegistryComponent checks the registry's build (the wrapper module's
// main package, the version it reports) and that the node image (its
// components and so its cache key) leaves it out, as it runs on the host.
func TestRegistryComponent(t *testing.T) {
	c := registryComponent()
	cmd := GoBuildCmd("/go/bin/go", "/cache", c, "/src", "/out")
	want := []string{"build", "-v", "-trimpath", "-ldflags",
		"-s -w -X github.com/distribution/distribution/v3/version.version=" + release.RegistryVersion, "-o", "/out/", "."}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("go build argv = %q, want %q", cmd.Args, want)
	}
	for _, ic := range Components(release.Default()) {
		if ic.Name == c.Name {
			t.Errorf("the node image's components include %s", c.Name)
		}
	}
}

// TestEnsureRegistryWithoutGo: a host without Go uses a build of the same
// sources cached by any toolchain (found by its inputs file), and gets a
// *PreconditionError naming the missing toolchain when there is none.
func TestEnsureRegistryWithoutGo(t *testing.T) {
	cache := t.TempDir()
	opts := Options{CacheDir: cache, Go: filepath.Join(t.TempDir(), "no-go")}
	_, err := EnsureRegistry(context.Background(), opts)
	var pe *PreconditionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "building it needs Go") {
		t.Fatalf("empty cache: err = %v, want a *PreconditionError about Go", err)
	}

	c := registryComponent()
	files, err := c.Sources()
	if err != nil {
		t.Fatal(err)
	}
	entry := func(name, inputs string) string {
		bin := filepath.Join(cache, "components", name, "bin", registryBinary)
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, "components", name, inputsFile), []byte(inputs+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	entry("registry-other", "some other sources")
	if _, err := EnsureRegistry(context.Background(), opts); !errors.As(err, &pe) {
		t.Fatalf("only a build of other sources: err = %v, want a *PreconditionError", err)
	}
	want := entry("registry-built-by-go1.26.8", c.Key("", files))
	got, err := EnsureRegistry(context.Background(), opts)
	if err != nil || got != want {
		t.Fatalf("EnsureRegistry = %q, %v; want the cached build %s", got, err, want)
	}
}

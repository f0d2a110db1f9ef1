package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/atomicfile"
)

// registryBinary is the program the registry component builds.
const registryBinary = "registry"

// registryComponent is the local platform's registry add-on: kiln's wrapper
// of the distribution registry (data/components/registry). It is built and
// cached like the node image's components, but it runs on the host: it is
// not one of components(), so the node image neither holds it nor depends
// on it.
func registryComponent() Component {
	return Component{
		Name: "registry", Version: release.RegistryVersion,
		Packages: []string{"."}, Binaries: []string{registryBinary},
		LDFlags: []string{"-X github.com/distribution/distribution/v3/version.version=" + release.RegistryVersion},
	}
}

// EnsureRegistry returns the registry binary of the pinned release,
// building it into <cache>/components/registry-<hash>/bin unless it is
// there. Building needs Go (not root); with nothing changed it only hashes
// its inputs. A host without Go takes a cached build of the same sources by
// any toolchain, and gets a *PreconditionError when there is none.
// Concurrent calls are serialized by a lock file in the cache.
func EnsureRegistry(ctx context.Context, opts Options) (string, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return "", err
	}
	unlock, err := atomicfile.Lock(b.cache, filepath.Join(b.cache, "registry.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	c := registryComponent()
	files, err := c.Sources()
	if err != nil {
		return "", err
	}
	inputs := c.Key("", files)
	if b.goErr != nil {
		// No Go: any cached build of the same sources will do, as for the
		// node image (Image.Inputs).
		if bin := cachedByInputs(b.cache, c, inputs); bin != "" {
			b.log.Debugf("registry: cached in %s (no Go toolchain: matched by its inputs %s)", filepath.Dir(bin), inputs)
			return bin, nil
		}
		return "", &PreconditionError{fmt.Errorf("the registry add-on's binary (inputs %s) is not in the cache %s, and building it needs Go: %w "+
			"(or switch the add-on off: platform.local.addons.registry: false)", inputs, b.cache, b.goErr)}
	}
	built, err := b.ensureComponent(ctx, c)
	if err != nil {
		return "", fmt.Errorf("building the registry: %w", err)
	}
	// Record the inputs beside the build, so that a host without Go that
	// gets this cache finds it (once: the entry's inputs never change).
	path := filepath.Join(filepath.Dir(built.Bin), inputsFile)
	if data, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(data)) != inputs {
		if err := atomicfile.Write(path, []byte(inputs+"\n"), 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(built.Bin, registryBinary), nil
}

// inputsFile, in a component's cache entry, holds the key of its sources
// without the Go toolchain.
const inputsFile = "inputs"

// cachedByInputs returns the binary of a complete cache entry of c whose
// inputs file says inputs; "" when there is none.
func cachedByInputs(cache string, c Component, inputs string) string {
	dirs, _ := filepath.Glob(filepath.Join(cache, "components", c.Name+"-*"))
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, inputsFile))
		if err != nil || strings.TrimSpace(string(data)) != inputs {
			continue
		}
		bc := builtComponent{Component: c, Bin: filepath.Join(d, "bin")}
		if bc.complete() {
			return filepath.Join(bc.Bin, c.Binaries[0])
		}
	}
	return ""
}

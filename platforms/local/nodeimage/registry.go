package nodeimage

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/kiln-project/kiln/assets/release"
)

// registryBinary is the program the registry component builds.
const registryBinary = "registry"

// registryComponent is the local platform's registry add-on: kiln's wrapper
// of the distribution registry (data/components/registry). It is built and
// cached like the node image's components, but it runs on the host: it is
// not one of components(), so the node image neither holds it nor depends
// on it.
func registryComponent() component {
	return component{
		Name: "registry", Version: release.RegistryVersion,
		Packages: []string{"."}, Binaries: []string{registryBinary},
		LDFlags: []string{"-X github.com/distribution/distribution/v3/version.version=" + release.RegistryVersion},
	}
}

// EnsureRegistry returns the registry binary of the pinned release,
// building it into <cache>/components/registry-<hash>/bin unless it is
// there. Building needs Go (not root); with nothing changed it only hashes
// its inputs. Concurrent calls are serialized by a lock file in the cache.
func EnsureRegistry(ctx context.Context, opts Options) (string, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(b.cache, "registry.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	built, err := b.ensureComponent(ctx, registryComponent())
	if err != nil {
		return "", fmt.Errorf("building the registry: %w", err)
	}
	return filepath.Join(built.Bin, registryBinary), nil
}

package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
)

// LoadImageArchive imports the docker or OCI image archive at path into the
// container runtime of the cluster's nodes (all of them when nodes is
// empty), for platforms whose provisioner can (platforms.ImageLoader).
func LoadImageArchive(ctx context.Context, t Target, prov platforms.Provisioner, path string, nodes []string) error {
	loader, ok := prov.(platforms.ImageLoader)
	if !ok {
		return graph.WithKind(graph.KindInput, fmt.Errorf("platform %s cannot load images into its nodes", t.Platform))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return graph.WithKind(graph.KindInput, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return graph.WithKind(graph.KindInput, fmt.Errorf("image archive: %w", err))
	}
	if !st.Mode().IsRegular() {
		return graph.WithKind(graph.KindInput, fmt.Errorf("image archive %s is not a regular file", path))
	}
	return loader.LoadImageArchive(ctx, t.InfraID, abs, nodes)
}

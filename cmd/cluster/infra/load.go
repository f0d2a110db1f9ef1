package infra

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms"
)

// LoadImageArchive imports the docker or OCI image archive at path into the
// container runtime of the cluster's nodes (all of them when nodes is
// empty), for platforms whose provisioner can (platforms.ImageLoader). The
// loader's failure is an infrastructure failure, but for node names the
// cluster does not have (*platforms.UnknownNodesError): bad input.
func LoadImageArchive(ctx context.Context, t Target, prov platforms.Provisioner, path string, nodes []string) error {
	loader, ok := prov.(platforms.ImageLoader)
	if !ok {
		return exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot load images into its nodes", t.Platform))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return exitcode.With(exitcode.Input, fmt.Errorf("image archive: %w", err))
	}
	if !st.Mode().IsRegular() {
		return exitcode.With(exitcode.Input, fmt.Errorf("image archive %s is not a regular file", path))
	}
	return exitcode.With(exitcode.Infrastructure, loader.LoadImageArchive(ctx, t.InfraID, abs, nodes))
}

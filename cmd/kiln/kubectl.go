package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/metadata"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/internal/kubectl"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// newKubectlCmd is `kiln kubectl`: the cluster release's own kubectl,
// from kiln's cache, against the cluster of --dir. It only reads --dir, so
// it keeps no debug log there.
func newKubectlCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl [-- ARGS...]",
		Short: "Run the kubectl of the cluster's Kubernetes release against the cluster of --dir",
		Long: "Run the kubectl that kiln built with the node image (the same Kubernetes release as the\n" +
			"cluster, so always within the version skew policy) with KUBECONFIG set to --dir's\n" +
			"auth/kubeconfig. Everything after -- goes to kubectl as it is, and kubectl's exit code is\n" +
			"kiln's. Put kiln's own flags (--dir) before --.",
		Example:     "  kiln kubectl --dir mycluster -- get nodes -o wide\n  kiln kubectl --dir mycluster -- -n kube-system logs -f deploy/coredns",
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{debugLogAnnotation: debugLogNone},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kubectlCommand(o.dir, os.Getenv, os.Environ(), args)
			if err != nil {
				return err
			}
			if err := o.checkAPIRoute(cmd.Context(), filepath.Join(o.dir, installdir.AdminKubeconfig)); err != nil {
				return exitcode.With(exitcode.Infrastructure, fmt.Errorf("the cluster's API: %w", err))
			}
			return fmt.Errorf("run %s: %w", c.Path, c.Exec())
		},
	}
	// kubectl's flags after its first argument go to it without --.
	cmd.Flags().SetInterspersed(false)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return exitcode.With(exitcode.Input, fmt.Errorf("%w: kubectl's flags go after --, e.g. kiln kubectl --dir DIR -- -n kube-system get pods", err))
	})
	return cmd
}

// kubectlCommand is the run of `kiln kubectl args` on the cluster of dir:
// the release's kubectl from the cache that getenv names, KUBECONFIG the
// cluster's admin kubeconfig. A missing kubeconfig or kubectl is an input
// error that says how to get it.
func kubectlCommand(dir string, getenv func(string) string, environ, args []string) (kubectl.Command, error) {
	config, err := filepath.Abs(filepath.Join(dir, installdir.AdminKubeconfig))
	if err != nil {
		return kubectl.Command{}, err
	}
	if _, err := os.Stat(config); errors.Is(err, fs.ErrNotExist) {
		return kubectl.Command{}, exitcode.With(exitcode.Input, fmt.Errorf(
			"--dir %s has no %s: create the cluster there first (kiln create cluster --dir %s)", dir, installdir.AdminKubeconfig, dir))
	}
	cache, err := platforms.CacheDir(getenv)
	if err != nil {
		return kubectl.Command{}, exitcode.With(exitcode.Input, err)
	}
	r, err := clusterRelease(dir)
	if err != nil {
		return kubectl.Command{}, err
	}
	bin, err := nodeimage.Kubectl(cache, r.Kubernetes)
	if errors.As(err, new(*nodeimage.NotCachedError)) {
		return kubectl.Command{}, exitcode.With(exitcode.Input, err)
	}
	if err != nil {
		return kubectl.Command{}, err
	}
	return kubectl.New(bin, config, args, environ), nil
}

// clusterRelease is the release the cluster of dir runs, as its
// metadata.json records it. A metadata.json that is missing, unreadable
// or names a release this kiln does not pin is an input error naming it;
// one that names no release (a cluster made before kiln recorded it,
// when kiln pinned one release) gives the default release. It is read
// as every file of --dir is (graph.ReadFile: no symbolic link, no FIFO,
// bounded size).
func clusterRelease(dir string) (release.Release, error) {
	data, err := graph.ReadFile(dir, installdir.Metadata, graph.OtherInput)
	if err != nil {
		return release.Release{}, exitcode.With(exitcode.Input, fmt.Errorf("%s names the cluster's Kubernetes release: %w", installdir.Metadata, err))
	}
	c, err := metadata.Parse(data)
	if err != nil {
		return release.Release{}, exitcode.With(exitcode.Input, err)
	}
	if c.KubernetesVersion == "" {
		return release.Default(), nil
	}
	r, err := release.Lookup(c.KubernetesVersion)
	if err != nil {
		return release.Release{}, exitcode.With(exitcode.Input, fmt.Errorf("%s: kubernetesVersion: %w", installdir.Metadata, err))
	}
	return r, nil
}

package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// newBuildCmd groups the commands that build what kiln installs from.
func newBuildCmd(o *rootOptions) *cobra.Command {
	build := &cobra.Command{
		Use:   "build",
		Short: "Build artefacts that clusters are installed from",
		Args:  cobra.NoArgs,
	}
	build.AddCommand(newBuildNodeImageCmd(o))
	return build
}

// newBuildNodeImageCmd builds the local platform's node image, or finds it
// in the cache.
func newBuildNodeImageCmd(o *rootOptions) *cobra.Command {
	var output, cacheDir, version string
	cmd := &cobra.Command{
		Use:   "node-image",
		Short: "Build the local platform's node image (Debian + containerd + Kubernetes from source), cached",
		Long: "Builds the node image that local machines boot from: Kubernetes, etcd, CoreDNS, pause,\n" +
			"containerd and runc from source, a Debian root file system from the host's apt mirror, and\n" +
			"the container images.\n" +
			"Every step is cached in the kiln cache directory ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,\n" +
			"else ~/.cache/kiln); with nothing changed the command returns in seconds. Needs root and Go.\n" +
			"--kubernetes-version builds the image of another release kiln pins (kiln version lists them);\n" +
			"each release's image has its own cache entry.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rel, err := lookupRelease(version)
			if err != nil {
				return err
			}
			o.openDebugLog()
			start := time.Now()
			img, err := nodeimage.Ensure(cmd.Context(), nodeimage.Options{CacheDir: cacheDir, Log: o.log, Progress: o.status, Release: rel})
			if err != nil {
				return buildError(err)
			}
			if output != "" {
				end := o.status.Start("Exporting the node image to " + output)
				err := img.Export(cmd.Context(), output)
				end(err)
				if err != nil {
					return buildError(err)
				}
			}
			r := img.Release
			fmt.Fprintf(o.stdout, "node image %s (%s)\n  rootfs: %s\n  kubernetes %s, etcd %s, coredns %s, pause %s, containerd %s, runc %s, debian %s\n",
				img.Hash, time.Since(start).Round(100*time.Millisecond), img.RootFS, r.Kubernetes, r.Etcd, r.CoreDNS, r.Pause, r.Containerd, r.Runc, r.Debian)
			if output != "" {
				fmt.Fprintf(o.stdout, "  exported: %s\n", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "also export the root file system as a tarball (.tar.zst, .tar.gz, .tgz or .tar)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "kiln cache directory (default $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or ~/.cache/kiln)")
	addKubernetesVersionFlag(cmd, &version)
	return cmd
}

// addKubernetesVersionFlag adds --kubernetes-version, the release to build.
func addKubernetesVersionFlag(cmd *cobra.Command, version *string) {
	cmd.Flags().StringVar(version, "kubernetes-version", release.Default().Kubernetes,
		"the Kubernetes release to build: "+strings.Join(release.Versions(), ", "))
}

// lookupRelease is the release of --kubernetes-version; an unknown version
// is bad input naming the ones there are.
func lookupRelease(version string) (release.Release, error) {
	r, err := release.Lookup(version)
	if err != nil {
		return r, exitcode.With(exitcode.Input, fmt.Errorf("--kubernetes-version: %w", err))
	}
	return r, nil
}

// buildError classifies a failed build or export: a precondition the user
// must fix (not root, no Go toolchain, a bad --output) is bad input; the
// rest is an infrastructure failure.
func buildError(err error) error {
	if pe := (*nodeimage.PreconditionError)(nil); errors.As(err, &pe) {
		return exitcode.With(exitcode.Input, err)
	}
	return exitcode.With(exitcode.Infrastructure, err)
}

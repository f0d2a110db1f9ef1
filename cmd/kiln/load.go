package main

import (
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/infra"
)

func newLoadCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "load", Short: "Load container images into a cluster's nodes", Args: cobra.NoArgs}
	var (
		infraID string
		nodes   []string
	)
	archive := &cobra.Command{
		Use:   "image-archive FILE.tar",
		Short: "Import a docker or OCI image archive (docker save, ctr export) into every node's containerd, namespace k8s.io",
		Long: "Import a docker or OCI image archive into the container runtime of the cluster's nodes (--dir's cluster),\n" +
			"so pods use the images without pulling: name them in pods by the archive's image names, with\n" +
			"imagePullPolicy IfNotPresent or Never. Platforms that cannot do this say so.\n" +
			"On a local cluster with the registry add-on, the images of a docker-archive are also pushed into the\n" +
			"cluster's image registry when the nodes look them up there (kiln.local, registry.k8s.io and docker.io\n" +
			"images, and the registry's own localhost:<port>/... names), so imagePullPolicy Always works too.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, prov, err := o.openTarget(cmd.Context(), infraID)
			if err != nil {
				return err
			}
			return infra.LoadImageArchive(cmd.Context(), t, prov, args[0], nodes)
		},
	}
	archive.Flags().StringSliceVar(&nodes, "nodes", nil, "comma-separated node names to load into (default: every node)")
	archive.Flags().StringVar(&infraID, "infra-id", "", "the cluster's infra ID when metadata.json is lost")
	cmd.AddCommand(archive)
	return cmd
}

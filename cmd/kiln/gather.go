package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/infra"
)

// errNothingToGather is gather's error in a --dir that names no cluster.
var errNothingToGather = errors.New("no cluster in --dir (no metadata.json and no kiln state): nothing to gather from; pass --infra-id <id> for a cluster created elsewhere")

func newGatherCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "gather", Short: "Collect diagnostics from a cluster", Args: cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""}}
	var infraID string
	bootstrap := &cobra.Command{
		Use:   "bootstrap",
		Short: "Collect journals (bootkube, kubelet, etcd, ...) and pod logs of the bootstrap machine and masters into a tar.gz in --dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, prov, err := o.openTarget(cmd.Context(), infraID)
			if errors.Is(err, infra.ErrNothingToDestroy) {
				return exitcode.With(exitcode.Input, errNothingToGather)
			}
			if err != nil {
				return err
			}
			path, err := infra.Gather(cmd.Context(), o.dir, t, prov, time.Now())
			if path != "" {
				fmt.Fprintf(o.stdout, "Log bundle written to %s\n", path)
			}
			return err
		},
	}
	bootstrap.Flags().StringVar(&infraID, "infra-id", "", "the cluster's infra ID when metadata.json is lost")
	cmd.AddCommand(bootstrap)
	return cmd
}

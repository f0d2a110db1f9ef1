package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
)

// newExplainCmd is `kiln explain installconfig[.path]`.
func newExplainCmd(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "explain installconfig[.field.field...]",
		Short:   "Describe install-config.yaml or one of its fields",
		Example: "  kiln explain installconfig\n  kiln explain installconfig.networking.clusterNetwork",
		Args: func(_ *cobra.Command, args []string) error {
			return exitcode.With(exitcode.Input, cobra.ExactArgs(1)(nil, args))
		},
		RunE: func(_ *cobra.Command, args []string) error {
			text, err := installconfig.Explain(args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(o.stdout, text)
			return err
		},
	}
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms/lb"
)

// newLBCmd runs the local platform's API load balancer in the foreground.
// The provider's load_balancer resource starts it detached; it is hidden.
func newLBCmd(o *rootOptions) *cobra.Command {
	var opts lb.ServeOptions
	cmd := &cobra.Command{
		Use:    "lb",
		Short:  "Run the local platform's API load balancer (started by the kilnlocal provider)",
		Hidden: true,
		// It runs for the cluster's life: stream the debug log, never buffer it.
		Annotations: map[string]string{debugLogAnnotation: debugLogStream},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = o.log
			return exitcode.With(exitcode.Infrastructure, lb.Serve(cmd.Context(), opts))
		},
	}
	cmd.Flags().StringVar(&opts.ConfigPath, "config", "", "JSON configuration file (reloaded on SIGHUP and on change)")
	cmd.Flags().StringVar(&opts.PIDFile, "pid-file", "", "file to write the process id to once listening")
	cmd.MarkFlagRequired("config")
	return cmd
}

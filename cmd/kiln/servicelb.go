package main

import (
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
)

// newServiceLBCmd runs the local platform's LoadBalancer Service controller
// in the foreground. `create cluster` starts it detached; it is hidden.
func newServiceLBCmd(o *rootOptions) *cobra.Command {
	var opts servicelb.ServeOptions
	cmd := &cobra.Command{
		Use:    "service-lb",
		Short:  "Give the local cluster's LoadBalancer Services addresses on the host bridge (started by create cluster)",
		Hidden: true,
		// It runs for the cluster's life: stream the debug log, never buffer it.
		Annotations: map[string]string{debugLogAnnotation: debugLogStream},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = o.log
			opts.Run = machine.ExecRunner{Log: o.log}
			return exitcode.With(exitcode.Infrastructure, servicelb.Serve(cmd.Context(), opts))
		},
	}
	cmd.Flags().StringVar(&opts.ConfigPath, "config", "", "JSON configuration file")
	cmd.Flags().StringVar(&opts.PIDFile, "pid-file", "", "file to write the process id to once running")
	cmd.MarkFlagRequired("config")
	return cmd
}

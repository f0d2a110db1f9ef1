package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/certs"
)

// newCertsCmd is `kiln certs`: reports on the cluster's certificates. It
// only reads --dir, so it keeps no debug log there.
func newCertsCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "certs",
		Short:       "Inspect the certificates of --dir and of the cluster's nodes",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{debugLogAnnotation: debugLogNone},
	}
	opts := certs.Options{Nodes: true, Timeout: 5 * time.Second}
	check := &cobra.Command{
		Use:   "check-expiration",
		Short: "Print when every certificate of --dir and every kubelet's certificates expire",
		Long: "Print when every certificate of --dir (its state and any certificate or kubeconfig file in it) and,\n" +
			"through the API with --dir's auth/kubeconfig, every node's kubelet serving (and, while its CSR\n" +
			"exists, client) certificate expires. STATUS is EXPIRING within 30 days, EXPIRED after.\n" +
			"--dir is only read.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Dir, opts.Now, opts.Log = o.dir, time.Now(), o.log
			var err error
			if opts.Dial, err = o.readOnlyDialer(); err != nil {
				return err
			}
			return certs.CheckExpiration(cmd.Context(), o.stdout, opts)
		},
	}
	check.Flags().BoolVar(&opts.Nodes, "nodes", opts.Nodes, "also show the nodes' kubelet certificates (needs the API)")
	check.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "timeout of each API request and TLS handshake")
	cmd.AddCommand(check)
	return cmd
}

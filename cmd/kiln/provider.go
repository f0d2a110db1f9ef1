package main

import (
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms/local/provider"
	sshprovider "github.com/kiln-project/kiln/platforms/ssh/provider"
)

// newProviderCmd serves the local platform's Terraform provider over the
// plugin protocol. Terraform/OpenTofu start it through the script kiln
// installs in its provider mirror; it is not for people, so it is hidden.
// Nothing but the plugin handshake may reach stdout.
func newProviderCmd(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:    provider.Command,
		Short:  "Serve the local platform's Terraform provider (started by Terraform/OpenTofu)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.openDebugLog()
			err := provider.Serve(cmd.Context(), provider.HostFactory(o.log))
			return exitcode.With(exitcode.Infrastructure, err)
		},
	}
}

// newSSHProviderCmd serves the ssh platform's Terraform provider
// (kilnssh_host: the user's hosts, installed and reset over SSH), hidden
// like the local one.
func newSSHProviderCmd(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:    sshprovider.Command,
		Short:  "Serve the ssh platform's Terraform provider (started by Terraform/OpenTofu)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.openDebugLog()
			err := sshprovider.Serve(cmd.Context(), sshprovider.SSHFactory)
			return exitcode.With(exitcode.Infrastructure, err)
		},
	}
}

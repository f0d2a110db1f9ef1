package main

import (
	"context"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/graph"
)

// newShowCmd is `kiln show <asset>`: what kiln uses, with secrets redacted.
func newShowCmd(o *rootOptions) *cobra.Command {
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the effective value of an asset of --dir, secrets redacted",
		Args:  cobra.NoArgs,
	}
	show.AddCommand(&cobra.Command{
		Use:   "install-config",
		Short: "Print the effective install-config (defaults applied; pull secret redacted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.effectiveInstallConfig(cmd.Context())
			if err != nil {
				return err
			}
			b, err := yaml.Marshal(installconfig.Redacted(cfg))
			if err != nil {
				return err
			}
			return writeAll(o.stdout, b)
		},
	})
	return show
}

// effectiveInstallConfig is the install-config kiln would use: an
// install-config.yaml in --dir (defaulted and validated; an edit wins, as in
// `kiln create`), else the state file's; on the ssh platform with the
// hosts a scale changed (machineset.EffectiveConfig), so that its output
// edited is the next scale's --config.
func (o *rootOptions) effectiveInstallConfig(ctx context.Context) (*types.Config, error) {
	store, err := graph.Open(o.dir)
	if err != nil {
		return nil, err
	}
	ic := &installconfig.InstallConfig{}
	if err := store.Fetch(ctx, ic); err != nil {
		return nil, err
	}
	return machineset.EffectiveConfig(o.dir, ic.Config)
}

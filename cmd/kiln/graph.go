package main

import (
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph"
)

// newGraphCmd is `kiln graph`: the asset DAG as Graphviz dot.
func newGraphCmd(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "graph",
		Short: "Print the graph of assets as Graphviz dot (kiln graph | dot -Tsvg > graph.svg)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return graph.WriteDot(o.stdout, targets.Assets()...)
		},
	}
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/rotateca"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
)

// newScaleCmd is `kiln scale cluster`: day-2 changes of the machines.
func newScaleCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "scale", Short: "Add or remove masters and workers of a running cluster", Args: cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""}}
	so := scale.Options{}
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Converge the cluster of --dir to the machines wanted, showing the plan first",
		Long: `Converge the masters and workers of the cluster of --dir to the replica counts wanted:
an edited install-config (--config, e.g. the output of 'kiln show install-config' with
controlPlane.replicas or compute[0].replicas changed; any other change is refused) or
--masters/--workers. On platform ssh the machines are the hosts: add or remove master and
worker entries of platform.ssh.hosts in --config (the hosts to install are checked over SSH
first). The plan is printed like Terraform's ("+ worker w-1", "- worker w-0",
"~ replace master m-2") and applied after you answer yes (or with --yes); --plan only prints it.

Masters stay at 1, 3 or 5. A master joins etcd as a learner, votes once caught up, and
serves behind the load balancer once its API server is ready; a master leaves etcd before
its machine goes. A worker is drained (PodDisruptionBudgets respected) before its Node and
machine go. An interrupted scale resumes when run again. See docs/day-2.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.openCluster(cmd.Context(), install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			// A machine that joins gets --dir's CAs only.
			if err := rotateca.UnderWay(s.cluster.Dir, "adding or removing machines"); err != nil {
				return err
			}
			return scale.Scale(cmd.Context(), s.cluster, s.prov, so, o.log, o.status, o.stdin, o.stdout)
		},
	}
	f := cluster.Flags()
	f.StringVar(&so.Config, "config", "", "an edited install-config whose controlPlane.replicas and compute[].replicas (and platform.ssh.hosts) are wanted")
	f.IntVar(&so.Masters, "masters", -1, "masters wanted: 1, 3 or 5 (default: --config's, else unchanged)")
	f.IntVar(&so.Workers, "workers", -1, "workers wanted (default: --config's, else unchanged)")
	f.StringSliceVar(&so.Remove, "remove", nil, "machines to remove first when a count shrinks (default: the highest indexes)")
	f.StringSliceVar(&so.Replace, "replace", nil, "masters to replace with a fresh machine of the same name (a failed or broken one)")
	f.BoolVar(&so.PlanOnly, "plan", false, "print the plan and change nothing")
	f.BoolVar(&so.Yes, "yes", false, "apply the plan without asking")
	f.BoolVar(&so.Force, "force", false, "remove a master even when that leaves an even etcd member count or no healthy majority; "+
		"drain by deleting pods (unmanaged ones too) instead of evicting them, ignoring PodDisruptionBudgets")
	f.DurationVar(&so.DrainTimeout, "drain-timeout", scale.DefaultDrainTimeout, "how long to wait for a worker's drain")
	f.DurationVar(&so.JoinTimeout, "join-timeout", scale.DefaultJoinTimeout, "how long to wait for each step of a machine's join")
	cmd.AddCommand(cluster)
	return cmd
}

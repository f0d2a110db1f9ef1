package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/renew"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
	"github.com/kiln-project/kiln/cmd/cluster/upgrade"
)

// newUpgradeCmd is `kiln upgrade cluster`: move a running cluster to a
// newer pinned Kubernetes release.
func newUpgradeCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "upgrade", Short: "Upgrade a running cluster to a newer Kubernetes release", Args: cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""}}
	f := upgrade.Flags{}
	renewCerts := true
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Move the cluster of --dir to the release --to names, node by node, showing the plan first",
		Long: `Move the cluster of --dir to a newer Kubernetes release kiln pins (kiln version lists them),
one minor at a time. The cluster must be healthy first: every node Ready, every etcd member
answering, every control-plane pod Ready. The plan is printed first, every node and component
from -> to, in order: each etcd member, one at a time; each master's API server (out of the
load balancer while it restarts), controller manager and scheduler; the masters' kubelets; the
workers (cordoned, drained through the Eviction API, changed, uncordoned); then kube-proxy and
CoreDNS. It is applied after you answer yes (or with --yes); --plan only prints it.

Before the first change etcd is saved into --dir/upgrade/ (0600). Each change must pass its
health gate within --step-timeout, or it is rolled back on its node and the upgrade stops,
naming the node, the component and the last error. Each step is recorded in --dir before it
begins: an interrupted upgrade finishes when run again. Once every node runs the new release the
leaf certificates are renewed, as kiln certs renew does (and kubeadm upgrade apply);
--certificate-renewal=false skips it. See docs/upgrade.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := release.Lookup(f.To); err != nil {
				return exitcode.With(exitcode.Input, fmt.Errorf("--to: %w", err))
			}
			if f.WorkerBatch < 1 {
				return exitcode.With(exitcode.Input, fmt.Errorf("--worker-batch: %d: at least 1", f.WorkerBatch))
			}
			s, err := o.openCluster(cmd.Context(), install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			if renewCerts {
				r, err := o.renewal(s)
				if err != nil {
					return err
				}
				f.Finish = func(ctx context.Context) error {
					fmt.Fprintln(o.stdout, "Renewing the certificates, as every upgrade does (--certificate-renewal=false skips it)")
					return r.Run(ctx, renew.Options{Timeout: scale.DefaultJoinTimeout})
				}
			}
			return upgrade.Upgrade(cmd.Context(), s.cluster, s.prov, f, o.log, o.stdin, o.stdout)
		},
	}
	fl := cluster.Flags()
	fl.StringVar(&f.To, "to", release.Default().Kubernetes, "the Kubernetes version to move to (kiln version lists them)")
	fl.BoolVar(&f.PlanOnly, "plan", false, "print the plan and change nothing")
	fl.BoolVar(&f.Yes, "yes", false, "apply the plan without asking")
	fl.IntVar(&f.WorkerBatch, "worker-batch", 1, "how many workers to drain and change at once")
	fl.DurationVar(&f.DrainTimeout, "drain-timeout", scale.DefaultDrainTimeout, "how long each node's drain may take (a PodDisruptionBudget may block it)")
	fl.DurationVar(&f.StepTimeout, "step-timeout", upgrade.DefaultStepTimeout, "how long each change may take to turn healthy before it is rolled back")
	fl.BoolVar(&renewCerts, "certificate-renewal", renewCerts, "renew the cluster's leaf certificates once every node runs the new release, as kiln certs renew does")
	cmd.AddCommand(cluster)
	return cmd
}

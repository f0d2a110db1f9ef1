package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/cmd/cluster/certs"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/renew"
	"github.com/kiln-project/kiln/cmd/cluster/rotateca"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
)

// apiProbeTimeout bounds renew's first look at the API, which decides
// whether the masters are renewed one at a time.
const apiProbeTimeout = 10 * time.Second

// newCertsCmd is `kiln certs`: the cluster's certificates.
func newCertsCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Inspect, renew and rotate the certificates of --dir and of the cluster's nodes",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCertsCheckCmd(o), newCertsRenewCmd(o), newCertsRotateCACmd(o))
	return cmd
}

// newCertsCheckCmd only reads --dir, so it keeps no debug log there.
func newCertsCheckCmd(o *rootOptions) *cobra.Command {
	opts := certs.Options{Nodes: true, Timeout: 5 * time.Second}
	check := &cobra.Command{
		Use:   "check-expiration",
		Short: "Print when every certificate of --dir and every kubelet's certificates expire",
		Long: "Print when every certificate of --dir (its state and any certificate or kubeconfig file in it) and,\n" +
			"through the API with --dir's auth/kubeconfig, every node's kubelet serving (and, while its CSR\n" +
			"exists, client) certificate expires, and the certificates each master serves on :6443, :2379,\n" +
			":2380 and :22623 (which the masters renew by themselves with pki.renewal Automatic).\n" +
			"STATUS is EXPIRING within 30 days, EXPIRED after.\n" +
			"--dir is only read.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{debugLogAnnotation: debugLogNone},
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Dir, opts.Now, opts.Log = o.dir, time.Now(), o.log
			var err error
			if opts.Dial, err = o.readOnlyDialer(); err != nil {
				return err
			}
			return certs.CheckExpiration(cmd.Context(), o.stdout, opts)
		},
	}
	check.Flags().BoolVar(&opts.Nodes, "nodes", opts.Nodes, "also show the nodes' kubelet certificates and what each master serves (needs the API)")
	check.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "timeout of each API request and TLS handshake")
	return check
}

func newCertsRenewCmd(o *rootOptions) *cobra.Command {
	opts := renew.Options{Timeout: scale.DefaultJoinTimeout}
	cmd := &cobra.Command{
		Use:   "renew [NAME...]",
		Short: "Issue the cluster's leaf certificates again from its CAs and put them on the masters",
		Long: fmt.Sprintf(`Issue the leaf certificates of --dir's cluster again from the CAs in --dir, for the lifetime of
install-config's pki.leafValidity, and put them on the masters without the API: %s.
Only the API server, kube-controller-manager and kube-scheduler restart. With the API up the masters
are renewed one at a time; when it does not answer (the certificates expired already) all at once.
auth/kubeconfig and the Ignition configs in --dir get the new certificates. Run it again after an
interrupt: it goes on with the same certificates. See docs/pki.md.`, strings.Join(renew.Names(), ", ")),
		Annotations: map[string]string{lockAnnotation: ""},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := renew.CheckNames(args); err != nil {
				return exitcode.With(exitcode.Input, err)
			}
			opts.Names = args
			s, err := o.openCluster(ctx, install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			r, err := o.renewal(s)
			if err != nil {
				return err
			}
			return r.Run(ctx, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "how long to wait for each master's components, the API and every node Ready")
	return cmd
}

func newCertsRotateCACmd(o *rootOptions) *cobra.Command {
	opts := rotateca.Options{Timeout: scale.DefaultJoinTimeout}
	cmd := &cobra.Command{
		Use:   "rotate-ca",
		Short: "Replace the cluster's CAs with new ones while it runs, and every certificate they signed",
		Long: `Replace the four CAs of --dir's cluster (root, kubelet serving, etcd, front proxy) with new ones while
it runs, with no node joining again, in four phases on every node, masters one at a time:
introduce (every node trusts the old and the new CAs; the cluster's Deployments, DaemonSets and
StatefulSets restart to read both), reissue (the new CAs go into --dir, the masters' certificates
and kubeconfigs are issued again from them and kube-controller-manager signs with them), kubelets
(every kubelet gets a client certificate and requests a serving certificate from the new CAs) and
retire (nothing trusts the old CAs; the workloads restart again). auth/ and the Ignition configs in
--dir use the new CAs once it is done. The cluster must be healthy to start. Run it again after an
interrupt: it goes on with the same new CAs. Not rotated: the service account key (not a CA);
bare pods keep trusting the old CAs until re-created. See docs/pki.md.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, err := o.openCluster(ctx, install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			shell, ok := s.prov.(platforms.NodeShell)
			if !ok {
				return exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot reach its machines without the cluster's API, so kiln cannot rotate its CAs", s.cluster.Config.PlatformName()))
			}
			r := &rotateca.Rotation{
				Cluster:  s.cluster,
				Shell:    shell,
				Reissue:  o.reissue,
				API:      func() (install.API, error) { return s.cluster.API(o.log, o.status, s.prov) },
				Log:      o.log,
				Progress: o.status,
				Out:      o.stdout,
				Now:      time.Now,
			}
			if sc, ok := s.prov.(platforms.Scaler); ok {
				// The cluster stage again, unchanged but for the admin
				// kubeconfig its LoadBalancer Service controller uses.
				r.Refresh = func(ctx context.Context) error { return sc.ApplyMachines(ctx, &s.cluster.Cluster) }
			}
			return r.Run(ctx, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "how long to wait for each node's components, the API, every node Ready and the workloads' rollouts")
	return cmd
}

// renewal is kiln certs renew of s's cluster, which kiln upgrade cluster
// runs too.
func (o *rootOptions) renewal(s *session) (*renew.Renewal, error) {
	if err := rotateca.UnderWay(s.cluster.Dir, "renewing certificates"); err != nil {
		return nil, err
	}
	shell, ok := s.prov.(platforms.NodeShell)
	if !ok {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot reach its machines without the cluster's API, so kiln cannot renew its certificates yet", s.cluster.Config.PlatformName()))
	}
	before, err := s.cluster.API(o.log, o.status, s.prov)
	if err != nil {
		return nil, err
	}
	return &renew.Renewal{
		Cluster: s.cluster,
		Shell:   shell,
		Reissue: o.reissue,
		APIReady: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, apiProbeTimeout)
			defer cancel()
			body, err := before.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return err
			}
			if string(body) != "ok" {
				return errors.New("/readyz: " + string(body))
			}
			return nil
		},
		API:      func() (install.API, error) { return s.cluster.API(o.log, o.status, s.prov) },
		Log:      o.log,
		Progress: o.status,
		Out:      o.stdout,
		Now:      time.Now,
	}, nil
}

// reissue issues the assets ids again in --dir, with every file made from
// them: the state, auth/ and the Ignition configs.
func (o *rootOptions) reissue(ctx context.Context, ids []string) error {
	store, err := graph.Open(o.dir, graph.WithLogger(o.log), graph.WithRetired(targets.Retired()...), graph.WithRenew(ids...))
	if err != nil {
		return err
	}
	return o.createTarget(ctx, store, targets.IgnitionConfigs())
}

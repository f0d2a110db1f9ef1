package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/release"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/node/apiready"
	"github.com/kiln-project/kiln/cmd/node/bootkube"
	"github.com/kiln-project/kiln/cmd/node/certinstall"
	"github.com/kiln-project/kiln/cmd/node/certrenew"
	"github.com/kiln-project/kiln/cmd/node/csrapprover"
	"github.com/kiln-project/kiln/cmd/node/etcdmember"
	"github.com/kiln-project/kiln/cmd/node/mcs"
	"github.com/kiln-project/kiln/cmd/node/netd"
	"github.com/kiln-project/kiln/cmd/node/permission"
	"github.com/kiln-project/kiln/cmd/node/probe"
	"github.com/kiln-project/kiln/cmd/node/resolvconf"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms/resolvers"
)

// newNodeCmd groups the agents that run on kiln's machines, from the kiln
// binary bound into each of them. They log to stderr (the journal).
func newNodeCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "node",
		Short:  "Agents that run on cluster machines (used by kiln's Ignition configs)",
		Hidden: true,
		// Agents run for the machine's life; their log is the journal.
		Annotations: map[string]string{debugLogAnnotation: debugLogNone},
	}
	cmd.AddCommand(newNodeMCSCmd(o), newNodeBootkubeCmd(o), newNodeNetdCmd(o), newNodeEtcdCertsCmd(o), newNodeEtcdInstallCmd(o), newNodeEtcdRestoreCmd(o), newNodeEtcdBackupCmd(o), newNodeCertsInstallCmd(o), newNodeCertsRenewCmd(o), newNodeProbeCmd(o),
		newNodeCSRApproverCmd(o), newNodeAwaitPermissionCmd(o), newNodeResolvConfCmd(o), newNodeCARotateCmd(o), newNodeSupportsCmd(),
		newNodeMachineConfigControllerCmd(o), newNodeMachineConfigAgentCmd(o), newNodeWaitAPIReadyCmd(o))
	return cmd
}

func newNodeMCSCmd(o *rootOptions) *cobra.Command {
	var dir, listen, poolKubeconfig string
	cmd := &cobra.Command{
		Use:   "mcs",
		Short: "Serve Ignition configs to joining machines over TLS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var overlay mcs.Overlay
			if poolKubeconfig != "" {
				overlay = func(ctx context.Context, role string, config []byte) ([]byte, error) {
					client, err := nodeClient(poolKubeconfig) // read at each request: the kubelet writes it after the server starts
					if err != nil {
						return nil, err
					}
					return machineconfig.WithPoolConfig(ctx, client.Discovery().RESTClient(), config, role)
				}
			}
			return mcs.Serve(cmd.Context(), listen, dir, overlay, o.log)
		},
	}
	cmd.Flags().StringVar(&poolKubeconfig, "pool-kubeconfig", "", "kubeconfig to read each role's MachineConfigPool with, to serve its rendered config merged in (none: serve the files as they are)")
	cmd.Flags().StringVar(&dir, "config-dir", nodelayout.MCSConfigDir, "directory with <role>.ign, tls.crt and tls.key")
	cmd.Flags().StringVar(&listen, "listen", fmt.Sprintf(":%d", nodelayout.MCSPort), "listen address")
	return cmd
}

func newNodeBootkubeCmd(o *rootOptions) *cobra.Command {
	cfg := bootkube.Config{Kubectl: "/usr/local/bin/kubectl", InstallerImage: release.PauseImage()}
	cmd := &cobra.Command{
		Use:   "bootkube",
		Short: "Bootstrap the cluster from the bootstrap machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Log = o.log
			return bootkube.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "admin kubeconfig of the local API server")
	f.StringVar(&cfg.ManifestsDir, "manifests-dir", nodelayout.BootstrapManifestsDir, "objects to apply")
	f.StringVar(&cfg.UserManifestsList, "user-manifests", nodelayout.BootstrapUserManifestsList, "file naming the manifests the user added, one a line (logged)")
	f.StringVar(&cfg.EtcdPKIDir, "etcd-pki-dir", nodelayout.EtcdPKIDir, "etcd CA certificate and key")
	f.StringVar(&cfg.EtcdClientCert, "etcd-client-cert", "", "etcd client certificate")
	f.StringVar(&cfg.EtcdClientKey, "etcd-client-key", "", "etcd client key")
	f.StringVar(&cfg.MasterEtcdManifest, "master-etcd-manifest", "", "masters' etcd static pod template")
	f.IntVar(&cfg.Masters, "masters", 1, "number of masters to hand over to")
	f.StringVar(&cfg.NodeName, "node-name", "", "this machine's node and etcd member name")
	f.StringVar(&cfg.DoneFile, "done-file", nodelayout.BootkubeDoneFile, "written when bootstrap is complete")
	f.DurationVar(&cfg.EtcdMemberValidity, "etcd-member-validity", kilntls.LeafValidity, "lifetime of the masters' etcd member certificates (install-config's pki.leafValidity)")
	f.BoolVar(&cfg.RetireFirst, "retire-first", false, "stop the temporary control plane and remove the bootstrap etcd member as soon as every master's member votes, before the masters' API servers are up (slower hardware)")
	return cmd
}

// credentialsPoll is how often netd looks for the kubelet's credentials
// while the kubelet's TLS bootstrap has not written them yet.
const credentialsPoll = 500 * time.Millisecond

// awaitNodeClient is nodeClient once kubeconfig and the files it names
// exist: a joining node's kubelet writes them only when its client
// certificate is issued, and the node's pod network should be configured
// the moment its Node exists (exiting for systemd to restart the unit cost
// its RestartSec, 5 s, before the node could turn Ready).
func awaitNodeClient(ctx context.Context, kubeconfig string, every time.Duration, log logrus.FieldLogger) (kubernetes.Interface, error) {
	var client kubernetes.Interface
	logged := false
	err := wait.PollUntilContextCancel(ctx, every, true, func(context.Context) (bool, error) {
		c, err := nodeClient(kubeconfig)
		switch {
		case err == nil:
			client = c
			return true, nil
		case !errors.Is(err, fs.ErrNotExist) && !clientcmd.IsEmptyConfig(err):
			// An empty kubeconfig is one being written: the kubelet
			// writes it in place (clientcmd.WriteToFile), not by rename.
			return false, err
		case !logged:
			log.Infof("waiting for the kubelet's credentials (%v)", err)
			logged = true
		}
		return false, nil
	})
	return client, err
}

// nodeClient is the clientset of a node agent, with the credentials in
// kubeconfig.
func nodeClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

func newNodeNetdCmd(o *rootOptions) *cobra.Command {
	var kubeconfig, nodeIP, serviceNetwork, serviceRoute string
	var clusterNetworks []string
	cfg := netd.Config{CNIConfPath: nodelayout.CNIConfig, Runner: execRunner{}, ProxyMetricsURL: netd.DefaultProxyMetricsURL}
	cmd := &cobra.Command{
		Use:   "netd",
		Short: "Maintain this node's pod network (CNI config and routes to other nodes' pods)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := setNetdNetwork(&cfg, nodeIP); err != nil {
				return err
			}
			if err := setNetdEgress(&cfg.Egress, clusterNetworks, serviceNetwork); err != nil {
				return err
			}
			if serviceRoute != "" {
				p, err := netip.ParsePrefix(serviceRoute)
				if err != nil || !p.Addr().Is4() {
					return exitcode.With(exitcode.Input, fmt.Errorf("--service-route: %q is not an IPv4 prefix", serviceRoute))
				}
				cfg.ServiceRoute = p.Masked()
			}
			client, err := awaitNodeClient(cmd.Context(), kubeconfig, credentialsPoll, o.log)
			if err != nil {
				return err
			}
			cfg.Log = o.log
			return netd.Run(cmd.Context(), client, cfg)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", nodelayout.KubeletKubeconfig, "kubeconfig with the node's credentials")
	cmd.Flags().StringVar(&cfg.NodeName, "node-name", "", "this node's name")
	cmd.Flags().StringVar(&cfg.CNIConfPath, "cni-conf", cfg.CNIConfPath, "CNI configuration file to write")
	cmd.Flags().StringVar(&cfg.NetworkType, "network-type", types.NetworkTypeKilnBridge,
		"the pod network, install-config's networking.networkType: "+strings.Join(types.NetworkTypes(), " or "))
	cmd.Flags().StringVar(&nodeIP, "node-ip", "", "this machine's IPv4 address, the local end of KilnVXLAN's tunnels (empty: the Node's InternalIP)")
	cmd.Flags().StringVar(&cfg.ProxyMetricsURL, "proxy-metrics-url", cfg.ProxyMetricsURL, "kube-proxy's metrics: a new CNI config waits for its first sync (empty: no wait)")
	cmd.Flags().DurationVar(&cfg.ProxyWait, "proxy-wait", netd.DefaultProxyWait, "longest wait for kube-proxy's first sync")
	cmd.Flags().StringVar(&cfg.Egress.Mode, "egress", types.EgressNone,
		"what pods reach outside the cluster, install-config's networking.egress: "+strings.Join(types.Egresses(), " or ")+" (NAT masquerades pod traffic leaving the pod and Service networks)")
	cmd.Flags().StringSliceVar(&clusterNetworks, "cluster-network", nil, "the pod networks (networking.clusterNetwork), with --egress NAT")
	cmd.Flags().StringVar(&serviceNetwork, "service-network", "", "the Service network (networking.serviceNetwork), with --egress NAT")
	cmd.Flags().StringVar(&serviceRoute, "service-route", "",
		"the Service network (networking.serviceNetwork), routed on-link through --node-ip's interface when this host has no route to it (empty: never)")
	return cmd
}

// setNetdEgress checks netd's --egress and parses its networks.
func setNetdEgress(e *netd.Egress, clusterNetworks []string, serviceNetwork string) error {
	var errs []error
	for _, c := range clusterNetworks {
		p, err := netip.ParsePrefix(c)
		if err != nil || !p.Addr().Is4() {
			errs = append(errs, fmt.Errorf("--cluster-network: %q is not an IPv4 prefix", c))
			continue
		}
		e.ClusterNetworks = append(e.ClusterNetworks, p.Masked())
	}
	if serviceNetwork != "" {
		p, err := netip.ParsePrefix(serviceNetwork)
		if err != nil || !p.Addr().Is4() {
			errs = append(errs, fmt.Errorf("--service-network: %q is not an IPv4 prefix", serviceNetwork))
		}
		e.ServiceNetwork = p.Masked()
	}
	if len(errs) == 0 {
		if _, err := netd.EgressRules(*e); err != nil {
			errs = append(errs, fmt.Errorf("--egress: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	return nil
}

// setNetdNetwork checks netd's --network-type and sets its --node-ip.
func setNetdNetwork(cfg *netd.Config, nodeIP string) error {
	if !slices.Contains(types.NetworkTypes(), cfg.NetworkType) {
		return exitcode.With(exitcode.Input, fmt.Errorf("--network-type: %q is none of %s",
			cfg.NetworkType, strings.Join(types.NetworkTypes(), ", ")))
	}
	if nodeIP == "" {
		return nil
	}
	ip, err := netip.ParseAddr(nodeIP)
	if err != nil || !ip.Is4() {
		return exitcode.With(exitcode.Input, fmt.Errorf("--node-ip: %q is not an IPv4 address", nodeIP))
	}
	cfg.NodeIP = ip
	return nil
}

func newNodeCSRApproverCmd(o *rootOptions) *cobra.Command {
	var kubeconfig string
	var names, domains, ips, cidrs []string
	cmd := &cobra.Command{
		Use:   "csr-approver",
		Short: "Approve kubelet serving and node client certificate requests for the machines of kiln's machine inventory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			deny, err := csrapprover.NewDenyList(names, domains, ips, cidrs)
			if err != nil {
				return exitcode.With(exitcode.Input, err)
			}
			client, err := nodeClient(kubeconfig)
			if err != nil {
				return err
			}
			return csrapprover.Run(cmd.Context(), client, deny, o.log)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the approver's ServiceAccount, or the admin's on the bootstrap machine (in-cluster config when empty)")
	cmd.Flags().StringArrayVar(&names, "deny-name", nil, "DNS name never approved, whatever the inventory says (repeatable)")
	cmd.Flags().StringArrayVar(&domains, "deny-domain", nil, "DNS domain never approved, with every name under it (repeatable)")
	cmd.Flags().StringArrayVar(&ips, "deny-ip", nil, "IP address never approved (repeatable)")
	cmd.Flags().StringArrayVar(&cidrs, "deny-cidr", nil, "CIDR block whose addresses are never approved (repeatable)")
	return cmd
}

func newNodeEtcdCertsCmd(o *rootOptions) *cobra.Command {
	var dir, name, ip string
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "etcd-certs",
		Short: "Issue this machine's etcd member certificates with the etcd CA in --pki-dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr := net.ParseIP(ip)
			if addr == nil {
				return exitcode.With(exitcode.Input, fmt.Errorf("--node-ip: %q is not an IP address", ip))
			}
			ca, err := etcdmembers.LoadCA(dir)
			if err != nil {
				return err
			}
			m, err := etcdmembers.Issue(cmd.Context(), ca, name, addr, validity)
			if err != nil {
				return err
			}
			files := etcdmembers.Files(ca.Cert, m)
			delete(files, etcdmembers.CACert)
			o.log.Infof("issued etcd member certificates for %s (%s) in %s", name, ip, dir)
			return etcdmember.WriteFiles(dir, files)
		},
	}
	cmd.Flags().StringVar(&dir, "pki-dir", nodelayout.EtcdPKIDir, "directory with ca.crt and ca.key; certificates are written there")
	cmd.Flags().StringVar(&name, "node-name", "", "node name")
	cmd.Flags().StringVar(&ip, "node-ip", "", "node IP address")
	cmd.Flags().DurationVar(&validity, "validity", kilntls.LeafValidity, "lifetime of the certificates (install-config's pki.leafValidity)")
	return cmd
}

func newNodeEtcdInstallCmd(o *rootOptions) *cobra.Command {
	var from, kubeDir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "etcd-install",
		Short: "Install an etcd member on this master and activate its control plane once the member votes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return etcdmember.Install(ctx, from, filepath.Clean(kubeDir), o.log)
		},
	}
	cmd.Flags().StringVar(&from, "from", "/secret", "directory with the member's files")
	cmd.Flags().StringVar(&kubeDir, "kubernetes-dir", nodelayout.KubernetesDir, "the node's /etc/kubernetes")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "how long to wait for the member to vote")
	return cmd
}

func newNodeEtcdRestoreCmd(o *rootOptions) *cobra.Command {
	r := etcdmember.Restore{Exec: execRunner{}.Run, Stopped: etcdmember.LocalStopped}
	cmd := &cobra.Command{
		Use:   "etcd-restore",
		Short: "This master's part of kiln restore cluster: stop etcd and the API server, keep etcd's data aside, restore a snapshot",
		Long: `Stop this master's etcd and API server (their static pods out of the kubelet's directory; the
API server's staged, as on a master that joins), keep etcd's data aside in <data-dir>/member.before-restore-<run>,
and, given --snapshot, restore it with etcdutl as a new one-member cluster and start etcd and the API
server on it. Run by kiln restore cluster on every master; a second run of the same --run does nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (r.Snapshot == "") != (r.Name == "") || (r.Snapshot == "") != (r.PeerURL == "") {
				return exitcode.With(exitcode.Input, errors.New("--snapshot, --node-name and --peer-url go together"))
			}
			r.KubeDir, r.DataDir, r.Log = filepath.Clean(r.KubeDir), filepath.Clean(r.DataDir), o.log
			return r.Do(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&r.Run, "run", "", "the restore's name")
	cmd.Flags().StringVar(&r.Snapshot, "snapshot", "", "the snapshot to restore, on the master that restores it")
	cmd.Flags().StringVar(&r.Name, "node-name", "", "this master's member name (with --snapshot)")
	cmd.Flags().StringVar(&r.PeerURL, "peer-url", "", "this master's peer URL (with --snapshot)")
	cmd.Flags().StringVar(&r.KubeDir, "kubernetes-dir", nodelayout.KubernetesDir, "the node's /etc/kubernetes")
	cmd.Flags().StringVar(&r.DataDir, "data-dir", nodelayout.EtcdDataDir, "etcd's data directory")
	cmd.Flags().StringVar(&r.Marker, "marker", nodelayout.EtcdRestoreMarker, "the file that records the restore done")
	cmd.Flags().StringVar(&r.Etcdutl, "etcdutl", path.Join(release.BinDir, "etcdutl"), "etcdutl of the node's release")
	_ = cmd.MarkFlagRequired("run")
	return cmd
}

func newNodeEtcdBackupCmd(o *rootOptions) *cobra.Command {
	s := backup.Scheduled{Dir: nodelayout.BackupDir, Keep: types.DefaultBackupKeep, Now: time.Now}
	var encryptTo []string
	var caFile, certFile, keyFile string
	timeout := 10 * time.Minute
	cmd := &cobra.Command{
		Use:   "etcd-backup",
		Short: "A backup the cluster takes by itself: this master's etcd snapshot, archived into --backup-dir",
		Long: `Take a snapshot of this master's etcd member (the API server's etcd client certificate), check it,
and archive it, encrypted to --encrypt-to when given, into --backup-dir as <infra ID>-<UTC time>.tar.gz[.age]
(0600); then remove all but the newest --keep archives of the cluster there. Run by the CronJob
kiln-system/kiln-etcd-backup that install-config's backup.schedule creates. The archive holds no file of
--dir: kiln restore cluster reads them from --dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if s.Manifest.InfraID == "" {
				return exitcode.With(exitcode.Input, errors.New("--infra-id is required"))
			}
			if len(encryptTo) > 0 {
				rs, err := age.ParseRecipients(strings.NewReader(strings.Join(encryptTo, "\n")))
				if err != nil {
					return exitcode.With(exitcode.Input, fmt.Errorf("--encrypt-to: %w", err))
				}
				s.Recipients = rs
			}
			s.Manifest.Kubernetes = inClusterVersion(o.log)
			etcd, err := etcdmembers.Dial([]string{s.Source}, caFile, certFile, keyFile)
			if err != nil {
				return err
			}
			defer etcd.Close()
			_, err = s.Run(ctx, etcd, o.stdout)
			return err
		},
	}
	cmd.Flags().StringVar(&s.Dir, "backup-dir", s.Dir, "where the archives are kept")
	cmd.Flags().StringVar(&s.Manifest.Cluster, "cluster", "", "the cluster's name")
	cmd.Flags().StringVar(&s.Manifest.InfraID, "infra-id", "", "the cluster's infra ID")
	cmd.Flags().StringVar(&s.Manifest.Platform, "platform", "", "the cluster's platform")
	cmd.Flags().IntVar(&s.Keep, "keep", s.Keep, "how many archives of the cluster to keep")
	cmd.Flags().StringArrayVar(&encryptTo, "encrypt-to", nil, "an age public key to encrypt the archives to (repeatable)")
	cmd.Flags().StringVar(&s.Source, "endpoint", "https://127.0.0.1:2379", "this master's etcd client URL")
	cmd.Flags().StringVar(&caFile, "cacert", nodelayout.EtcdPKIDir+"/ca.crt", "etcd's CA")
	cmd.Flags().StringVar(&certFile, "cert", nodelayout.PKIDir+"/apiserver-etcd-client.crt", "the etcd client certificate")
	cmd.Flags().StringVar(&keyFile, "key", nodelayout.PKIDir+"/apiserver-etcd-client.key", "its key")
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "how long the backup may take")
	return cmd
}

// inClusterVersion is the API server's release, asked with the pod's own
// service account (anyone may read /version); "" when it does not answer,
// which does not stop a backup: etcd may be all that is left.
func inClusterVersion(log logrus.FieldLogger) string {
	rc, err := rest.InClusterConfig()
	if err == nil {
		rc.Timeout = 10 * time.Second
		var kube *kubernetes.Clientset
		if kube, err = kubernetes.NewForConfig(rc); err == nil {
			var v *kubeversion.Info
			if v, err = kube.Discovery().ServerVersion(); err == nil {
				return v.GitVersion
			}
		}
	}
	log.Warnf("the API server's version is not known (%v): the archive does not name it", err)
	return ""
}

func newNodeCertsInstallCmd(o *rootOptions) *cobra.Command {
	var bundle string
	var timeout time.Duration
	var lock bool
	cmd := &cobra.Command{
		Use:   "certs-install",
		Short: "This master's part of kiln certs renew: put new certificates in place and restart what reads them",
		Long: `Read and remove --bundle (written by kiln certs renew), put its certificates and kubeconfigs in
place on this master, restart the API server, kube-controller-manager and kube-scheduler through their
static pods (annotation ` + certinstall.Annotation + `), and wait until they run again and the API server
is ready with its new certificate. A second run of the same bundle restarts nothing; two runs take turns.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var b certbundle.Bundle
			if err := takeBundle(bundle, &b); err != nil {
				return err
			}
			return newNodeCertsInstall(o.log, lock).Do(ctx, b)
		},
	}
	cmd.Flags().StringVar(&bundle, "bundle", nodelayout.CertsRenewBundle, "the renewal's files (JSON, 0600)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the restarted components")
	cmd.Flags().BoolVar(&lock, "lock", false, "hold the cluster's renewal lock in etcd while the components restart (one master at a time)")
	return cmd
}

// newNodeCertsInstall is a master's certinstall.Install, holding the
// cluster's renewal lock when lock is set.
func newNodeCertsInstall(log logrus.FieldLogger, lock bool) *certinstall.Install {
	in := &certinstall.Install{
		KubeDir: nodelayout.KubernetesDir,
		Started: func(binary string) (time.Time, bool, error) { return certinstall.Started("/proc", binary) },
		Ready:   certinstall.LocalReady(nodelayout.PKIDir + "/ca.crt"),
		Now:     time.Now,
		Poll:    time.Second,
		Log:     log,
	}
	if lock {
		in.Lock = certinstall.EtcdLock("", 10*time.Second, log)
		in.Settle = certsSettle
	}
	return in
}

// certsSettle is how long a master keeps the renewal lock once its API
// server is ready again: two of kiln's load balancers' health checks
// (lb.DefaultInterval), which take it back at the first that passes.
const certsSettle = 5 * time.Second

func newNodeCertsRenewCmd(o *rootOptions) *cobra.Command {
	var before, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "certs-renew",
		Short: "This master's automatic renewal: issue again its certificates that expire within --before, one master at a time",
		Long: `Run by the kiln-certs-renew timer on every master (install-config pki.renewal Automatic). It
reads this master's control plane certificates and kubeconfigs, issues again each that expires within
--before from the CA on this master that signed it (the same key, names, usages and lifetime), takes
the cluster's renewal lock in etcd, puts them in place and restarts the API server, kube-controller-manager
and kube-scheduler as kiln certs renew does, waits until the API server is ready with its new
certificate, and lets the next master go. With nothing due it says when the next certificate is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before <= 0 {
				return exitcode.With(exitcode.Input, errors.New("--before must be a positive duration"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			r := certrenew.Renewer{
				Before:  before,
				Install: newNodeCertsInstall(o.log, true).Do,
				Now:     time.Now,
				Log:     o.log,
			}
			return r.Run(ctx)
		},
	}
	cmd.Flags().DurationVar(&before, "before", 30*24*time.Hour, "renew a certificate that expires within this (install-config pki.renewBefore)")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "how long to wait for the lock and the restarted components")
	return cmd
}

func newNodeProbeCmd(o *rootOptions) *cobra.Command {
	var serve, body, resolve, get, file string
	var every, retry time.Duration
	var size int64
	var download bool
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Checks from inside a pod: keep a file, resolve a name, fetch a URL (once or every interval), serve HTTP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if file != "" {
				content, found, err := probe.Persist(file, body)
				if err != nil {
					return err
				}
				verb := "wrote"
				if found {
					verb = "read"
				}
				fmt.Fprintf(o.stdout, "%s %s: %s\n", verb, file, content)
			}
			if resolve != "" {
				var addrs []string
				tries, err := probe.Retry(ctx, retry, probeRetryEvery, func() (err error) {
					addrs, err = probe.Resolve(ctx, resolve)
					return err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(o.stdout, "%s has address %s%s\n", resolve, addrs[0], triesNote(tries))
			}
			if get != "" && download {
				// A new pod may be refused until a NetworkPolicy engine
				// has learnt its address: retry for up to a minute, and
				// say how long that took.
				start := time.Now()
				var n int64
				var d time.Duration
				if _, err := probe.Retry(ctx, time.Minute, probeRetryEvery, func() (err error) {
					n, d, err = probe.Download(ctx, get)
					return err
				}); err != nil {
					return err
				}
				fmt.Fprintf(o.stdout, "%s: %d bytes in %s: %.1f MB/s (first try after %s)\n", get, n, d.Round(time.Millisecond),
					float64(n)/d.Seconds()/1e6, (time.Since(start) - d).Round(time.Millisecond))
				return nil
			}
			if get != "" && every > 0 {
				return probe.Watch(ctx, get, every, o.stdout)
			}
			if get != "" {
				var out string
				tries, err := probe.Retry(ctx, retry, probeRetryEvery, func() (err error) {
					out, err = probe.Get(ctx, get)
					return err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(o.stdout, "%s: %s%s\n", get, out, triesNote(tries))
			}
			if serve != "" && size > 0 {
				return probe.ServeSize(ctx, serve, size)
			}
			if serve != "" {
				return probe.Serve(ctx, serve, body)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&serve, "serve", "", "serve HTTP on this address until stopped")
	cmd.Flags().StringVar(&body, "body", "ok", "body of every HTTP answer")
	cmd.Flags().StringVar(&resolve, "resolve", "", "name to resolve")
	cmd.Flags().StringVar(&get, "get", "", "URL to fetch")
	cmd.Flags().BoolVar(&download, "download", false, "with --get: read the whole body and print its size and the transfer rate")
	cmd.Flags().Int64Var(&size, "size", 0, "with --serve: answer with this many zero bytes instead of --body")
	cmd.Flags().DurationVar(&every, "every", 0, "with --get: fetch the URL every interval, each on a new connection, printing \"<unix ms> ok|fail ...\" lines until stopped")
	cmd.Flags().StringVar(&file, "file", "", "print this file's content if it exists, else write --body into it")
	cmd.Flags().DurationVar(&retry, "retry", 0, "retry a failed --resolve or --get (once) every 100ms for up to this long (0: try once)")
	return cmd
}

// probeRetryEvery is the pause between a probe's tries.
const probeRetryEvery = 100 * time.Millisecond

// triesNote says after how many tries a probe succeeded; "" for the first.
func triesNote(tries int) string {
	if tries < 2 {
		return ""
	}
	return fmt.Sprintf(" (try %d)", tries)
}

func newNodeAwaitPermissionCmd(o *rootOptions) *cobra.Command {
	var kubeconfig string
	var timeout, every, perTry time.Duration
	cmd := &cobra.Command{
		Use:   "await-permission VERB RESOURCE[.GROUP]",
		Short: "Wait until --kubeconfig's credentials may do VERB on RESOURCE (as kubectl auth can-i asks), in one process",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			attrs, err := permission.Attributes(args[0], args[1])
			if err != nil {
				return err
			}
			client, err := nodeClient(kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return permission.Await(ctx, client.AuthorizationV1(), attrs, every, perTry, o.log)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", nodelayout.BootstrapKubeconfig, "kubeconfig with the credentials to check")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up (exit 1) after this long")
	cmd.Flags().DurationVar(&every, "every", time.Second, "pause between questions")
	// On a slow host (a VM under emulation) the API answers in more than 5 s.
	cmd.Flags().DurationVar(&perTry, "request-timeout", 30*time.Second, "longest wait for one answer")
	return cmd
}

func newNodeWaitAPIReadyCmd(o *rootOptions) *cobra.Command {
	w := apiready.Waiter{Log: func(s string) { o.log.Info(s) }}
	cmd := &cobra.Command{
		Use:   "wait-api-ready",
		Short: "Wait until the API server of this host is ready, on a host that runs one (the init container of MetalLB's speaker)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return w.Wait(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&w.URL, "url", "https://127.0.0.1:6443/readyz", "the API server's readiness endpoint on this host")
	cmd.Flags().StringVar(&w.Manifest, "manifest", path.Join(nodelayout.StaticPodDir, "kube-apiserver.yaml"), "the API server's static pod manifest: a host without it has none to wait for")
	cmd.Flags().DurationVar(&w.Every, "every", time.Second, "pause between questions")
	return cmd
}

func newNodeResolvConfCmd(o *rootOptions) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "resolv-conf",
		Short: "Point kubelet at the resolv.conf naming the host's resolvers, where /etc/resolv.conf names only loopback ones (systemd-resolved's stub)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files := resolvers.ResolvConfs()
			file := resolvconf.Choose(files, os.ReadFile)
			if err := resolvconf.Apply(dir, file, files[0]); err != nil {
				return err
			}
			o.log.Infof("kubelet's resolvConf, which pods with dnsPolicy Default (CoreDNS) get: %s", file)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "config-dir", nodelayout.KubeletConfigDir, "kubelet's configuration drop-in directory")
	return cmd
}

// execRunner runs commands on the local machine.
type execRunner struct{}

// Run implements netd.Runner.
func (execRunner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
}

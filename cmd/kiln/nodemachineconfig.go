package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/node/mcagent"
	"github.com/kiln-project/kiln/cmd/node/mccontroller"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// machineConfigLease is the Lease in kiln-system the controllers elect
// their leader with.
const machineConfigLease = "kiln-machine-config-controller"

func newNodeMachineConfigControllerCmd(o *rootOptions) *cobra.Command {
	var kubeconfig, namespace string
	cmd := &cobra.Command{
		Use:   "machine-config-controller",
		Short: "Render MachineConfigPools and roll their configs out node by node (leader-elected)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, dyn, err := nodeClients(kubeconfig)
			if err != nil {
				return err
			}
			id, err := os.Hostname()
			if err != nil {
				return err
			}
			id += "_" + time.Now().UTC().Format(time.RFC3339Nano)
			lock := &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: machineConfigLease, Namespace: namespace},
				Client:     client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: id},
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			// The controller runs in a goroutine of the elector's, which may
			// still be ending when RunOrDie returns: its error comes by channel.
			errs := make(chan error, 2)
			leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
				Lock:            lock,
				LeaseDuration:   30 * time.Second,
				RenewDeadline:   20 * time.Second,
				RetryPeriod:     4 * time.Second,
				ReleaseOnCancel: true,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(ctx context.Context) {
						errs <- mccontroller.Run(ctx, mccontroller.Config{Resync: 10 * time.Second, Log: o.log}, client, dyn)
						cancel()
					},
					OnStoppedLeading: func() {
						if ctx.Err() == nil {
							errs <- errors.New("lost the machine-config controller's lease")
						}
						cancel()
					},
				},
			})
			for {
				select {
				case err := <-errs:
					if err != nil {
						return err
					}
				default:
					return nil
				}
			}
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the controller's ServiceAccount (in-cluster config when empty)")
	cmd.Flags().StringVar(&namespace, "lease-namespace", "kiln-system", "namespace of the leader-election Lease")
	return cmd
}

func newNodeMachineConfigAgentCmd(o *rootOptions) *cobra.Command {
	var kubeconfig, nodeName string
	var interval time.Duration
	var revert bool
	cmd := &cobra.Command{
		Use:   "machine-config-agent",
		Short: "Apply this node's desired rendered config and report drift from it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if revert {
				return mcagent.Revert(cmd.Context(), machineconfig.NodePaths(), execRunner{})
			}
			if nodeName == "" {
				return exitcode.With(exitcode.Input, errors.New("--node-name is required"))
			}
			// A joining node's kubelet writes its kubeconfig once its client
			// certificate is issued, seconds after this starts.
			if err := waitForFile(cmd.Context(), kubeconfig, func() { o.log.Infof("waiting for %s (the kubelet's TLS bootstrap)", kubeconfig) }); err != nil {
				return err
			}
			client, dyn, err := nodeClients(kubeconfig)
			if err != nil {
				return err
			}
			return mcagent.Run(cmd.Context(), mcagent.Config{
				NodeName:       nodeName,
				Paths:          machineconfig.NodePaths(),
				Runner:         execRunner{},
				KubeletHealthz: nodelayout.KubeletHealthz,
				Interval:       interval,
				Log:            o.log,
				Orphans:        mcagent.NodeOrphanFS(),
			}, client, dyn)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", nodelayout.KubeletKubeconfig, "the node's own kubeconfig")
	cmd.Flags().StringVar(&nodeName, "node-name", "", "this machine's Node")
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "how often drift is checked")
	cmd.Flags().BoolVar(&revert, "revert", false, "take back everything MachineConfigs put on this machine, then exit (a reset of an ssh host runs it)")
	return cmd
}

// nodeClients are a typed and a dynamic client from kubeconfig (the
// in-cluster config when it is empty).
func nodeClients(kubeconfig string) (kubernetes.Interface, dynamic.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	return client, dyn, err
}

// waitForFile returns once name exists (calling waiting once if it does
// not at first), or when ctx ends.
func waitForFile(ctx context.Context, name string, waiting func()) error {
	for i := 0; ; i++ {
		if _, err := os.Stat(name); err == nil {
			return nil
		}
		if i == 0 {
			waiting()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/node/carotate"
	"github.com/kiln-project/kiln/cmd/node/certinstall"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// NodeFeatures are what `kiln node supports` answers yes to: the node-side
// parts of host commands that a node's kiln may predate.
func nodeFeatures() []string { return []string{"ca-rotation"} }

// newNodeSupportsCmd is `kiln node supports FEATURE`: exit 0 when this
// kiln has the node's part of FEATURE. A kiln that predates the command
// fails it as an unknown command, which is the answer no.
func newNodeSupportsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "supports FEATURE",
		Short: "Exit 0 when this node's kiln has its part of FEATURE (" + strings.Join(nodeFeatures(), ", ") + ")",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if !slices.Contains(nodeFeatures(), args[0]) {
				return exitcode.With(exitcode.Input, fmt.Errorf("this kiln has no node part of %q", args[0]))
			}
			return nil
		},
	}
}

func newNodeCARotateCmd(o *rootOptions) *cobra.Command {
	var bundle string
	var timeout time.Duration
	var lock bool
	cmd := &cobra.Command{
		Use:   "ca-rotate",
		Short: "This node's part of one phase of kiln certs rotate-ca",
		Long: `Read and remove --bundle (written by kiln certs rotate-ca), write its trust bundles, keys and
certificates, set the CA of every kubeconfig here, swap in the kubelet's new client certificate and
have it request a new serving one, restart etcd and the control plane (a master) and the kubelet and
kiln-netd, and wait until they run again. A second run of the same phase changes nothing more.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var b certbundle.Rotation
			if err := takeBundle(bundle, &b); err != nil {
				return err
			}
			r := &carotate.Rotate{
				Started:        func(binary string) (time.Time, bool, error) { return certinstall.Started("/proc", binary) },
				Ready:          certinstall.LocalReady(nodelayout.PKIDir + "/ca.crt"),
				Restart:        restartUnit,
				KubeletHealthy: kubeletHealthy,
				Now:            time.Now,
				Poll:           time.Second,
				Log:            o.log,
			}
			if lock {
				r.Lock = certinstall.EtcdLock("", 10*time.Second, o.log)
				r.Settle = certsSettle
			}
			return r.Do(ctx, b)
		},
	}
	cmd.Flags().StringVar(&bundle, "bundle", nodelayout.CARotationBundle, "the phase's files (JSON, 0600)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the restarted components")
	cmd.Flags().BoolVar(&lock, "lock", false, "hold the cluster's renewal lock in etcd while a master's components restart (one master at a time)")
	return cmd
}

// takeBundle reads the JSON bundle at p (written by kiln on the host) into
// v and removes it. Removed once read, not once applied: kiln on the host,
// killed and run again, puts the bundle again while this process may
// still apply the first (they take turns), and the first's late removal
// took the second's.
func takeBundle(p string, v any) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return exitcode.With(exitcode.Input, fmt.Errorf("%s: %w", p, err))
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// restartUnit restarts a systemd unit of this node.
func restartUnit(ctx context.Context, unit string) error {
	out, err := exec.CommandContext(ctx, "systemctl", "restart", unit).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// kubeletHealthy asks this node's kubelet for /healthz on its loopback
// health port.
func kubeletHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nodelayout.KubeletHealthz, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answers %s", resp.Status)
	}
	return nil
}

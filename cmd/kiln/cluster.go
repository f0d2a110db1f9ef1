package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/infra"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/internal/kubectl"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
)

func addTimeoutFlags(cmd *cobra.Command, t *install.Timeouts) {
	cmd.Flags().DurationVar(&t.API, "api-timeout", 0, "how long to wait for the Kubernetes API (default: install-config timeouts.api, else "+types.DefaultAPITimeout+")")
	cmd.Flags().DurationVar(&t.Bootstrap, "bootstrap-timeout", 0, "how long to wait for bootstrap-complete (default: timeouts.bootstrap, else "+types.DefaultBootstrapTimeout+")")
	cmd.Flags().DurationVar(&t.Install, "install-timeout", 0, "how long to wait for install-complete (default: timeouts.install, else "+types.DefaultInstallTimeout+")")
}

func newCreateClusterCmd(o *rootOptions, co *createOptions) *cobra.Command {
	var flags install.Timeouts
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Create the Ignition configs (if needed) and a cluster from them; re-run to resume",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.Check(); err != nil {
				return err
			}
			_, err := o.createCluster(cmd.Context(), co, flags)
			return err
		},
	}
	addTimeoutFlags(cmd, &flags)
	return cmd
}

// createCluster is kiln create cluster: the Ignition configs (if needed)
// and the cluster made from them, resumed where a run stopped; co is nil
// for a command that has no create flags.
func (o *rootOptions) createCluster(ctx context.Context, co *createOptions, flags install.Timeouts) (*session, error) {
	store, err := o.openStore(co)
	if err != nil {
		return nil, err
	}
	if err := o.createTarget(ctx, store, targets.IgnitionConfigs()); err != nil {
		return nil, err
	}
	s, err := o.openClusterIn(ctx, store, flags, withAPI)
	if err != nil {
		return nil, err
	}
	if err := install.Create(ctx, s.cluster, s.prov, s.api, o.log, o.stdout); err != nil {
		return nil, err
	}
	if note := kubectl.SkewNote(ctx, exec.LookPath, s.cluster.Resolved.Release.Kubernetes, o.dir); note != "" {
		fmt.Fprintln(o.stdout, note)
	}
	return s, nil
}

func newDestroyCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "destroy",
		Short:       "Destroy a cluster or its bootstrap machine",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""},
	}
	var infraID string
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Destroy the cluster of --dir (or --infra-id) and everything kiln created for it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, prov, err := o.openTarget(cmd.Context(), infraID)
			if errors.Is(err, infra.ErrNothingToDestroy) {
				o.log.Warn(err.Error())
				o.leaveDir = true
				return nil
			}
			if err != nil {
				return err
			}
			if err := infra.Destroy(cmd.Context(), o.dir, t, prov, o.log); err != nil {
				return err
			}
			fmt.Fprintf(o.stdout, "Cluster %s destroyed\n", t.InfraID)
			return nil
		},
	}
	cluster.Flags().StringVar(&infraID, "infra-id", "", "destroy by infra ID when metadata.json is lost (local platform: machines, load balancer and bridge named after it)")
	bootstrap := &cobra.Command{
		Use:   "bootstrap",
		Short: "Destroy the bootstrap machine (after bootstrap-complete)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.openCluster(cmd.Context(), install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			return install.DestroyBootstrap(cmd.Context(), s.cluster, s.prov, o.log)
		},
	}
	cmd.AddCommand(cluster, bootstrap)
	return cmd
}

func newWaitForCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "wait-for", Short: "Wait for an install milestone", Args: cobra.NoArgs}
	var flags install.Timeouts
	// waitCmd loads the cluster of --dir and runs wait on its API.
	waitCmd := func(use, short string, wait func(context.Context, *install.Cluster, install.API) error) *cobra.Command {
		c := &cobra.Command{
			Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := flags.Check(); err != nil {
					return err
				}
				// A platform kiln provisions also tells whether each
				// node's machine runs; others are judged by the API alone.
				s, err := o.openCluster(cmd.Context(), flags, withAPI|withMachinesOptional)
				if err != nil {
					return err
				}
				return wait(cmd.Context(), s.cluster, s.api)
			},
		}
		addTimeoutFlags(c, &flags)
		return c
	}
	cmd.AddCommand(
		waitCmd("bootstrap-complete", "Wait until the control plane has moved from the bootstrap machine to the masters",
			func(ctx context.Context, c *install.Cluster, api install.API) error {
				if err := install.WaitForBootstrapComplete(ctx, c, api, o.log); err != nil {
					return err
				}
				fmt.Fprintln(o.stdout, "It is now safe to remove the bootstrap resources: kiln destroy bootstrap")
				return nil
			}),
		waitCmd("install-complete", "Wait until every node is Ready and cluster DNS and the service proxy run",
			func(ctx context.Context, c *install.Cluster, api install.API) error {
				if err := install.WaitForInstallComplete(ctx, c, api, o.log); err != nil {
					return err
				}
				c.WriteComplete(o.stdout)
				return nil
			}),
	)
	return cmd
}

// provisioner opens the debug log in --dir and returns the provisioner of
// the named platform.
func (o *rootOptions) provisioner(ctx context.Context, platform string) (platforms.Provisioner, error) {
	o.openDebugLog()
	env, err := o.platformEnv(ctx)
	if err != nil {
		return nil, err
	}
	return install.Provisioner(platform, env)
}

// platformEnv is what provisioners log to, report to and cache in. The kiln
// binary that machines and Terraform run is a copy in the cache named by its
// hash, so a rebuilt or removed kiln never pulls it from under a cluster;
// a dynamically linked (cgo) kiln is replaced by a static build of itself,
// since the machines run it in an image with no C library.
func (o *rootOptions) platformEnv(ctx context.Context) (platforms.Env, error) {
	cache, err := platforms.CacheDir(os.Getenv)
	if err != nil {
		return platforms.Env{}, err
	}
	kiln, key, err := stableKiln(cache)
	if err != nil {
		return platforms.Env{}, exitcode.With(exitcode.Infrastructure, fmt.Errorf("copy the kiln binary into %s: %w", cache, err))
	}
	if kiln, err = staticKiln(ctx, o.log, kiln, cache, key); err != nil {
		return platforms.Env{}, err
	}
	return platforms.Env{Log: o.log, Progress: o.status, CacheDir: cache, Kiln: kiln}, nil
}

// stableKiln copies the running executable to <cache>/bin/kiln-<key>, key
// being a prefix of its hash.
func stableKiln(cache string) (path, key string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", "", err
	}
	f, err := os.Open(self)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", err
	}
	key = hex.EncodeToString(h.Sum(nil))[:16]
	dst := filepath.Join(cache, "bin", "kiln-"+key)
	if _, err := os.Stat(dst); err == nil {
		return dst, key, nil
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", "", err
	}
	return dst, key, atomicfile.Write(dst, data, 0o755)
}

func newStopCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "stop", Short: "Stop a cluster, keeping its machines' disks", Args: cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""}}
	cmd.AddCommand(&cobra.Command{
		Use:   "cluster",
		Short: "Shut the cluster of --dir down cleanly: workers, then masters one at a time, then the API load balancer (on the ssh platform, the node on each host; the hosts run on)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.openCluster(cmd.Context(), install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			return install.Stop(cmd.Context(), s.cluster, s.prov, o.log, o.stdout)
		},
	})
	return cmd
}

func newStartCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "start", Short: "Start a stopped cluster", Args: cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""}}
	var flags install.Timeouts
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Start every stopped machine and the API load balancer of --dir's cluster (after a stop, a crash or a host reboot) and wait until every node is Ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.openCluster(cmd.Context(), flags, withAPI)
			if err != nil {
				return err
			}
			return install.Start(cmd.Context(), s.cluster, s.prov, s.api, o.log, o.stdout)
		},
	}
	cluster.Flags().DurationVar(&flags.API, "api-timeout", 0, "how long to wait for the Kubernetes API (default: install-config timeouts.api, else 20m)")
	cluster.Flags().DurationVar(&flags.Install, "install-timeout", 0, "how long to wait for every node Ready (default: timeouts.install, else 30m)")
	cmd.AddCommand(cluster)
	return cmd
}

// Package install drives `kiln create cluster` and `kiln destroy`: an
// ordered list of small phases (provision, wait for the API, wait for
// bootstrap-complete, destroy the bootstrap machine, wait for
// install-complete), each with a title, run one after the other. Every phase
// is idempotent, so re-running create after a failure or an interrupt resumes
// where it stopped.
package install

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/ignitionconfigs"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/password"
	"github.com/kiln-project/kiln/cmd/internal/waitfor"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
)

// Default waits, used when neither install-config timeouts nor flags set them.
const (
	DefaultAPITimeout       = 20 * time.Minute
	DefaultBootstrapTimeout = 30 * time.Minute
	DefaultInstallTimeout   = 30 * time.Minute
)

// MinBootstrapCredentialLife is how long the bootstrap credentials in the
// Ignition configs must still be valid for a new bootstrap machine: configs
// older than half their 24 h lifetime are refused, as openshift-install does.
const MinBootstrapCredentialLife = 12 * time.Hour

// Timeouts are the flag overrides of install-config's timeouts; zero keeps
// install-config's value or the default.
type Timeouts struct {
	API, Bootstrap, Install time.Duration
}

// Cluster is everything the phases need, loaded from --dir's state.
type Cluster struct {
	platforms.Cluster
	// Kubeconfig is the admin kubeconfig in --dir.
	Kubeconfig string
	// PasswordFile is the kubeadmin password file in --dir.
	PasswordFile string
	// TokenExpiry is when the bootstrap credentials expire.
	TokenExpiry time.Time
	Timeouts    Timeouts
}

// Load reads the cluster of dir from its state (the ignition-configs target
// must have been created); flags override install-config's timeouts.
func Load(ctx context.Context, dir string, log logrus.FieldLogger, flags Timeouts) (*Cluster, error) {
	store, err := graph.Open(dir, graph.WithLogger(log))
	if err != nil {
		return nil, err
	}
	ic, cid := &installconfig.InstallConfig{}, &clusterid.ClusterID{}
	boot, master, worker := &ignitionconfigs.Bootstrap{}, &ignitionconfigs.Master{}, &ignitionconfigs.Worker{}
	admin, pw, tok := &kubeconfig.Admin{}, &password.KubeadminPassword{}, &bootstraptoken.BootstrapToken{}
	if err := store.Fetch(ctx, ic, cid, boot, master, worker, admin, pw, tok); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Cluster: platforms.Cluster{
			Dir: abs, Config: ic.Config, InfraID: cid.InfraID,
			Bootstrap: boot.File.Data, Master: master.File.Data, Worker: worker.File.Data,
		},
		Kubeconfig:   filepath.Join(abs, admin.File.Path),
		PasswordFile: filepath.Join(abs, pw.File.Path),
		TokenExpiry:  tok.Expiration,
	}
	c.Timeouts, err = timeouts(ic.Config.Timeouts, flags)
	if err != nil {
		return nil, graph.WithKind(graph.KindInput, err)
	}
	return c, nil
}

func timeouts(cfg *types.Timeouts, flags Timeouts) (Timeouts, error) {
	t := Timeouts{API: DefaultAPITimeout, Bootstrap: DefaultBootstrapTimeout, Install: DefaultInstallTimeout}
	if cfg != nil {
		for _, f := range []struct {
			field, value string
			dst          *time.Duration
		}{{"timeouts.api", cfg.API, &t.API}, {"timeouts.bootstrap", cfg.Bootstrap, &t.Bootstrap}, {"timeouts.install", cfg.Install, &t.Install}} {
			if f.value == "" {
				continue
			}
			d, err := time.ParseDuration(f.value)
			if err != nil {
				return t, fmt.Errorf("install-config.yaml: %s: %w", f.field, err)
			}
			*f.dst = d
		}
	}
	for _, f := range []struct{ flag, dst *time.Duration }{{&flags.API, &t.API}, {&flags.Bootstrap, &t.Bootstrap}, {&flags.Install, &t.Install}} {
		if *f.flag > 0 {
			*f.dst = *f.flag
		}
	}
	return t, nil
}

// Waiter returns a waiter on the cluster's API through the admin kubeconfig.
func (c *Cluster) Waiter(log logrus.FieldLogger, progress platforms.Progress) (*waitfor.Waiter, string, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, "", err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", err
	}
	return &waitfor.Waiter{Client: client, Log: log, Progress: progress}, rc.Host, nil
}

// Nodes is the number of nodes install-complete waits for.
func (c *Cluster) Nodes() int { return c.Config.MasterReplicas() + c.Config.WorkerReplicas() }

// Phase is one step of an install.
type Phase interface {
	// Title names the phase in progress output.
	Title() string
	// Run performs the phase; it must be safe to run again.
	Run(ctx context.Context) error
}

// Run runs phases in order and stops at the first error.
func Run(ctx context.Context, log logrus.FieldLogger, phases []Phase) error {
	for _, p := range phases {
		log.Debugf("phase: %s", p.Title())
		if err := p.Run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// phase adapts a function to Phase.
type phase struct {
	title string
	run   func(context.Context) error
}

func (p phase) Title() string                 { return p.title }
func (p phase) Run(ctx context.Context) error { return p.run(ctx) }

// Create is `kiln create cluster` after the Ignition configs exist: the
// phases of an install, then a summary on out.
func Create(ctx context.Context, c *Cluster, prov platforms.Provisioner, env platforms.Env, out io.Writer) error {
	start := time.Now()
	w, server, err := c.Waiter(env.Log, env.Progress)
	if err != nil {
		return err
	}
	phases := []Phase{
		phase{"check the bootstrap credentials", func(ctx context.Context) error {
			if w.IsBootstrapComplete(ctx) {
				c.BootstrapDone = true // resuming after the handover: no bootstrap machine, no bootstrap credentials
				return nil
			}
			return c.checkCredentials(time.Now())
		}},
		phase{"preflight", func(ctx context.Context) error { return prov.Preflight(ctx, &c.Cluster) }},
		phase{"provision", func(ctx context.Context) error { return prov.Provision(ctx, &c.Cluster) }},
		phase{"wait for the API", func(ctx context.Context) error { _, err := w.API(ctx, server, c.Timeouts.API); return err }},
		phase{"wait for bootstrap-complete", func(ctx context.Context) error { return w.BootstrapComplete(ctx, c.Timeouts.Bootstrap) }},
		phase{"destroy the bootstrap machine", func(ctx context.Context) error { return prov.DestroyBootstrap(ctx, &c.Cluster) }},
		phase{"wait for install-complete", func(ctx context.Context) error { return w.InstallComplete(ctx, c.Nodes(), c.Timeouts.Install) }},
	}
	if p, ok := prov.(waitfor.Prober); ok {
		phases = append(phases, phase{"check the pod network", func(ctx context.Context) error {
			return w.NetworkCheck(ctx, p, c.Timeouts.Install)
		}})
	}
	if err := Run(ctx, env.Log, phases); err != nil {
		return err
	}
	fmt.Fprintf(out, "Install complete!\n")
	fmt.Fprintf(out, "To access the cluster as the system:admin user: export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Fprintf(out, "The kubeadmin password is in %s\n", c.PasswordFile)
	fmt.Fprintf(out, "Time elapsed: %s\n", time.Since(start).Round(time.Second))
	return nil
}

// checkCredentials refuses Ignition configs whose bootstrap credentials
// expire too soon for a bootstrap machine to still come up with them.
func (c *Cluster) checkCredentials(now time.Time) error {
	left := c.TokenExpiry.Sub(now)
	if left >= MinBootstrapCredentialLife {
		return nil
	}
	return graph.WithKind(graph.KindInput, fmt.Errorf(
		"the Ignition configs in %s are too old: their bootstrap credentials expire at %s (%s left; at least %s are needed). "+
			"Create them again in a new directory (kiln create ignition-configs), or run `kiln destroy cluster` here first",
		c.Dir, c.TokenExpiry.Format(time.RFC3339), left.Round(time.Minute), MinBootstrapCredentialLife))
}

package scale

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/platforms"
)

// Default waits of a scale.
const (
	DefaultJoinTimeout  = 10 * time.Minute
	DefaultDrainTimeout = 5 * time.Minute
)

// EtcdPKI is what kiln needs to manage etcd members from the host: the
// etcd CA (only --dir holds its key after bootstrap), a client
// certificate it signed, and the masters' etcd static pod with
// manifests.EtcdInitialClusterMarker.
type EtcdPKI struct {
	CA       *kilntls.CertKey
	Client   *kilntls.CertKey
	Manifest string
	// Validity is the lifetime of a new member's certificates.
	Validity time.Duration
}

// Runner carries out plans on one cluster. Its fields are the cluster, its
// provisioner's Scaler ability and the clients of the API and etcd.
type Runner struct {
	// Cluster is the cluster as loaded from --dir; its Shape is kept up to
	// date as machines come and go.
	Cluster *platforms.Cluster
	// Machines creates and destroys machines and sets the API backends.
	Machines platforms.Scaler
	// Kube is the admin client through the load balancer.
	Kube kubernetes.Interface
	// Rest is its configuration, the base of direct clients of one master.
	Rest *rest.Config
	// Etcd dials etcd endpoints; etcdmembers.DialPEM with PKI's client
	// certificate in kiln, a fake in tests.
	Etcd func(endpoints []string) (Etcd, error)
	// PKI issues a new member's certificates.
	PKI EtcdPKI
	// Configs are the full Ignition configs of the roles ("master",
	// "worker"); a machine added boots from its role's, with a join token
	// of its own in place of the install-time one.
	Configs map[string][]byte
	// Joining holds the join tokens of the machines being added, as the
	// shape record keeps them.
	Joining map[string]string
	// InstallerImage is an image every node has, for the etcd installer.
	InstallerImage string
	// APIReady checks the API server on the master at an address; nil asks
	// its /readyz directly.
	APIReady func(ctx context.Context, ip string) error
	// Drain cordons and drains a node; Drainer.Drain in kiln.
	Drain func(ctx context.Context, node string) error
	// Force lets a master removal leave an even member count or go ahead
	// when quorum is at risk.
	Force bool
	// JoinTimeout bounds each machine's join (Node Ready, member voting).
	JoinTimeout time.Duration
	// Poll is how often waits check; a second when zero.
	Poll time.Duration

	Log      logrus.FieldLogger
	Progress platforms.Progress
	Out      io.Writer
	// Now is the clock, for the join tokens' expiry.
	Now func() time.Time
}

// record saves the shape record of the cluster with removing as the
// removals under way.
func (r *Runner) record(removing []string) error {
	r.Cluster.Shape = r.Cluster.Machines()
	for _, names := range [][]string{r.Cluster.Shape.Masters, r.Cluster.Shape.Workers} {
		// Stable: names that are not indexed (the ssh platform's hosts)
		// keep their order.
		slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(index(r.Cluster.InfraID, a), index(r.Cluster.InfraID, b)) })
	}
	// A machine gone takes its release entry with it.
	maps.DeleteFunc(r.Cluster.Releases, func(name, _ string) bool {
		return !slices.Contains(r.Cluster.Shape.All(), name)
	})
	return machineset.SaveShape(r.Cluster.Dir, machineset.ShapeRecord{Shape: r.Cluster.Shape, Removing: removing, Joining: r.Joining, Releases: r.Cluster.Releases})
}

// Run carries out p's actions in order. Each step is idempotent, and the
// shape record says what a re-run must finish.
func (r *Runner) Run(ctx context.Context, p *Plan) error {
	start := time.Now()
	r.Cluster.Shape = p.From
	for _, a := range p.Actions {
		t := time.Now()
		var err error
		switch {
		case a.Op == OpFinish && a.Role == machines.RoleMaster:
			err = r.addMaster(ctx, a.Name)
		case a.Op == OpAdd && a.Role == machines.RoleMaster:
			err = r.addMaster(ctx, a.Name)
		case a.Op == OpRemove && a.Role == machines.RoleMaster:
			err = r.removeMaster(ctx, a.Name)
		case a.Op == OpReplace:
			if err = r.removeMaster(ctx, a.Name); err == nil {
				err = r.addMaster(ctx, a.Name)
			}
		case a.Op == OpAdd && a.Role == machines.RoleWorker, a.Op == OpFinish && a.Role == machines.RoleWorker:
			err = r.addWorker(ctx, a.Name)
		case a.Op == OpRemove && a.Role == machines.RoleWorker:
			err = r.removeWorker(ctx, a.Name)
		default:
			err = fmt.Errorf("unknown action %s", a)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		fmt.Fprintf(r.Out, "%s: done in %s\n", a, time.Since(t).Round(100*time.Millisecond))
	}
	fmt.Fprintf(r.Out, "Scale complete: %d masters, %d workers (%s)\n",
		len(r.Cluster.Machines().Masters), len(r.Cluster.Machines().Workers), time.Since(start).Round(time.Second))
	return nil
}

// with returns names plus n (once).
func with(names []string, n string) []string {
	if slices.Contains(names, n) {
		return slices.Clone(names)
	}
	return append(slices.Clone(names), n)
}

// without returns names less n.
func without(names []string, n string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(x string) bool { return x == n })
}

// until calls check every r.Poll until it reports done, fails, or timeout
// passes; the progress line shows what it waits for and the error names
// the last state seen.
func (r *Runner) until(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (bool, string, error)) error {
	end := r.Progress.Start(what)
	every := r.Poll
	if every == 0 {
		every = time.Second
	}
	last, failed := "nothing checked yet", false
	err := wait.PollUntilContextTimeout(ctx, every, timeout, true, func(ctx context.Context) (bool, error) {
		done, state, err := check(ctx)
		if err != nil || done {
			failed = err != nil
			return done, err
		}
		if state != last {
			r.Progress.Update(state)
			r.Log.Debugf("%s: %s", what, state)
			last = state
		}
		return false, nil
	})
	if err != nil && !failed {
		err = fmt.Errorf("%s: not done after %s: %s", what, timeout, last)
	}
	end(err)
	return err
}

// step runs one titled step with a progress line.
func (r *Runner) step(title string, f func() error) error {
	end := r.Progress.Start(title)
	err := f()
	end(err)
	return err
}

// joinTimeout is r.JoinTimeout or its default.
func (r *Runner) joinTimeout() time.Duration {
	if r.JoinTimeout > 0 {
		return r.JoinTimeout
	}
	return DefaultJoinTimeout
}

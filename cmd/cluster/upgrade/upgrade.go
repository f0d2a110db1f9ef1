package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// Flags are the flags of kiln upgrade cluster.
type Flags struct {
	// To is the Kubernetes version to move to; "" is the newest pinned.
	To string
	// PlanOnly prints the plan and changes nothing.
	PlanOnly bool
	// Yes skips the confirmation.
	Yes bool
	// WorkerBatch is how many workers change at once.
	WorkerBatch int
	// DrainTimeout bounds each node's drain; StepTimeout each change's
	// health gate.
	DrainTimeout, StepTimeout time.Duration
	// Finish, when set, runs once every step is done, before the journal
	// goes, so that a run killed in it runs it again: kiln upgrade
	// cluster renews the certificates there, as kubeadm does.
	Finish func(ctx context.Context) error
}

// Upgrade is kiln upgrade cluster: check that c is healthy, plan its move
// to the release f.To names, print the plan and the removed APIs its
// clients still use, ask (unless f.Yes), prepare the release's payload,
// snapshot etcd into --dir, then carry the plan out step by step, each
// recorded in the journal first; an interrupted upgrade resumes where it
// stopped when run again.
func Upgrade(ctx context.Context, c *install.Cluster, prov platforms.Provisioner, f Flags, log logrus.FieldLogger,
	in io.Reader, out io.Writer) error {
	up, ok := prov.(platforms.Upgrader)
	backends, ok2 := prov.(platforms.Scaler)
	if !ok || !ok2 {
		return exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot upgrade its nodes", c.Config.PlatformName()))
	}
	to := release.Default()
	if f.To != "" {
		var err error
		if to, err = release.Lookup(f.To); err != nil {
			return exitcode.With(exitcode.Input, fmt.Errorf("--to: %w", err))
		}
	}
	j, found, err := LoadJournal(c.Dir)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	if found && j.To != to.Kubernetes {
		return exitcode.With(exitcode.Input, fmt.Errorf("an upgrade to %s is under way (%s): finish it first with kiln upgrade cluster --to %s", j.To, installdir.UpgradeJournal, j.To))
	}
	resuming := found && j.Begun != nil

	dial, err := c.Dialer(prov)
	if err != nil {
		return err
	}
	rc, err := c.RestConfig(dial)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	etcd, clusterVersion, err := dialEtcd(ctx, c.Dir, kube, dial)
	if err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	defer etcd.Close()
	list, err := etcd.MemberList(ctx)
	if err != nil {
		return exitcode.With(exitcode.Install, fmt.Errorf("etcd member list: %w", err))
	}
	seen, err := Observe(ctx, kube, etcdmembers.Check(ctx, etcd, list.Members))
	if err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	if err := Healthy(seen); err != nil {
		var u *UnhealthyError
		if !resuming || !errors.As(err, &u) {
			return exitcode.With(exitcode.Install, err)
		}
		fmt.Fprintf(out, "Resuming the step under way, although %v\n", err)
	}
	st, err := Inventory(ctx, kube, seen)
	if err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	plan, err := MakePlan(st, to, Options{WorkerBatch: f.WorkerBatch})
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	plan.Print(out)
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	pools := &Pools{Dyn: dyn, Kube: kube, Report: func(s string) { fmt.Fprintln(out, "      "+s) }}
	// The pools the upgrade paused are unpaused once every step is done,
	// before the journal goes: a run killed in between does it again.
	finish := func(ctx context.Context) error {
		if f.Finish != nil {
			if err := f.Finish(ctx); err != nil {
				return err
			}
		}
		return pools.Release(ctx)
	}
	warnRemovedAPIs(ctx, kube, release.MustParseVersion(to.Kubernetes), log, out)
	warnStoredObjects(ctx, rc, kube, plan.From, release.MustParseVersion(to.Kubernetes), log, out)
	if f.PlanOnly || (plan.Empty() && !resuming) {
		if f.PlanOnly || !found {
			return nil
		}
		// Every step done, the journal not removed yet: the run that did
		// them stopped before or in Finish.
		if err := finish(ctx); err != nil {
			return exitcode.With(exitcode.Install, err)
		}
		return RemoveJournal(c.Dir)
	}
	if !f.Yes {
		if err := scale.Confirm(in, out); err != nil {
			return exitcode.With(exitcode.Input, err)
		}
	}
	if err := up.PrepareRelease(ctx, &c.Cluster, to.Kubernetes); err != nil {
		return exitcode.With(exitcode.Infrastructure, err)
	}
	j.To = to.Kubernetes
	if j.Snapshot == "" {
		path, size, err := Snapshot(ctx, etcd, c.Dir, plan.From.String(), time.Now())
		if err != nil {
			return exitcode.With(exitcode.Install, err)
		}
		fmt.Fprintf(out, "etcd snapshot before the first change: %s (%.1f MiB, 0600); docs/upgrade.md shows how to restore it\n", path, float64(size)/(1<<20))
		j.Snapshot = path
		if err := SaveJournal(c.Dir, j); err != nil {
			return exitcode.With(exitcode.Install, err)
		}
	}
	// MachineConfig rollouts wait for the upgrade: it drains and changes
	// nodes alone.
	fmt.Fprintln(out, "Pausing the MachineConfig pools until the upgrade is done (kubectl get mcp)")
	if err := pools.Hold(ctx); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	drainer := &scale.Drainer{Client: kube, Timeout: f.DrainTimeout, Log: log}
	r := &Runner{Dir: c.Dir, StepTimeout: f.StepTimeout, Out: out, Finish: finish, Nodes: &ClusterNodes{
		Cluster: &c.Cluster, Upgrader: up, Backends: backends, Kube: kube, Etcd: etcd,
		EtcdClusterVersion: clusterVersion, Drainer: drainer.Drain}}
	return exitcode.With(exitcode.Install, r.Run(ctx, plan, j))
}

// maxStoredObjects bounds the objects warnStoredObjects names; it counts
// the rest.
const maxStoredObjects = 20

// warnStoredObjects prints the objects last written through an API
// version that target removes and the cluster at from serves: the
// manifests and clients behind them fail once target serves the cluster.
// Like warnRemovedAPIs it only warns.
func warnStoredObjects(ctx context.Context, rc *rest.Config, kube kubernetes.Interface, from, target release.Version, log logrus.FieldLogger, out io.Writer) {
	removed := RemovedKinds(clientscheme.Scheme, from, target)
	if len(removed) == 0 {
		return
	}
	preferred, err := kube.Discovery().ServerPreferredResources()
	if err != nil && len(preferred) == 0 {
		log.Warnf("cannot list the cluster's resources for objects of removed API versions: %v", err)
		return
	}
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		log.Warnf("cannot read the objects of removed API versions: %v", err)
		return
	}
	objs, err := StoredObjects(ctx, meta, preferred, removed)
	if err != nil {
		log.Warnf("cannot read every object of removed API versions: %v", err)
	}
	for i, o := range objs {
		if i == maxStoredObjects {
			fmt.Fprintf(out, "Warning: and %d more objects written through API versions %s removes\n", len(objs)-i, target)
			break
		}
		fmt.Fprintf(out, "Warning: %s: its manifest or client fails once the cluster runs %s\n", o, target)
	}
}

// dialEtcd connects to the members on every master, with the API server's
// etcd client certificate from dir's state; clusterVersion asks them for
// etcd's cluster version with the same certificate; every connection goes
// through dial.
func dialEtcd(ctx context.Context, dir string, kube kubernetes.Interface, dial netroute.Dialer) (c *clientv3.Client, clusterVersion func(context.Context) (string, error), err error) {
	found, err := scale.FindClusterEtcd(ctx, dir, kube)
	if err != nil {
		return nil, nil, err
	}
	tc, err := etcdmembers.TLSConfig(found.CA, found.Cert, found.Key)
	if err != nil {
		return nil, nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DialContext: dial.DialContext}}
	clusterVersion = func(ctx context.Context) (string, error) {
		return etcdmembers.ClusterVersion(ctx, hc, found.Endpoints)
	}
	c, err = found.Dial(dial.DialContext)
	return c, clusterVersion, err
}

// warnRemovedAPIs prints the API versions the cluster's clients asked for
// that target removes; it only warns, as kiln cannot tell a client that
// is gone from one that will break.
func warnRemovedAPIs(ctx context.Context, kube kubernetes.Interface, target release.Version, log logrus.FieldLogger, out io.Writer) {
	metrics, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		log.Warnf("cannot read the API server's metrics for removed APIs in use: %v", err)
		return
	}
	removed, err := RemovedAPIs(bytes.NewReader(metrics), target)
	if err != nil {
		log.Warnf("%v", err)
		return
	}
	for _, r := range removed {
		fmt.Fprintf(out, "Warning: clients of this cluster asked for %s: they fail once the cluster runs %s\n", r, target)
	}
}

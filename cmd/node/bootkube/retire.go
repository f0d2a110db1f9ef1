package bootkube

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// retireBeforeRemoval and retireAfterComplete name the bootstrap machine's
// control plane static pods (data/manifests/static-pods): the API server,
// controller manager and scheduler retire before the bootstrap etcd member
// is removed; etcd after bootstrap-complete is recorded.
func retireBeforeRemoval() []string {
	return []string{"kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"}
}

func retireAfterComplete() []string { return []string{"etcd.yaml"} }

// Defaults of the retirement: the local API server's address and how long
// to wait for it to stop.
const (
	localAPIAddress = "127.0.0.1:6443"
	// apiStopTimeout bounds the wait for the local API server to close its
	// port after its static pod is retired: it keeps serving for its
	// shutdown delay (10 s) while load balancers take it out, closes its
	// port, drains, and the kubelet kills it at the end of its grace period
	// (45 s).
	apiStopTimeout = 60 * time.Second
)

// retirer stops the bootstrap machine's temporary control plane once the
// masters run their own, by moving its static pods out of the kubelet's
// directory (the kubelet watches it and stops a pod whose file goes).
//
// Why: the load balancer keeps sending API clients to the bootstrap API
// server while it accepts connections, and once its etcd member is removed
// every request there hangs until the client's timeout, while its /readyz
// times out rather than failing (a slow backend keeps its sessions for a
// while). kiln's own wait for bootstrap-complete and pods talking to the
// "kubernetes" Service saw 10-30 s of hangs. Stopped first, the API server
// shuts down gracefully while its etcd still works, removing itself from
// the "kubernetes" Service's endpoints, and its closed port takes it out of
// the load balancer at the next health check.
type retirer struct {
	staticPodDir, retiredDir string
	apiAddress               string
	// every and timeout pace waitClosed.
	every, timeout time.Duration
}

func newRetirer(cfg Config) retirer {
	r := retirer{staticPodDir: cfg.StaticPodDir, retiredDir: cfg.RetiredPodDir, apiAddress: cfg.APIAddress,
		every: 200 * time.Millisecond, timeout: apiStopTimeout}
	if r.staticPodDir == "" {
		r.staticPodDir = nodelayout.StaticPodDir
	}
	if r.retiredDir == "" {
		r.retiredDir = nodelayout.RetiredPodDir
	}
	if r.apiAddress == "" {
		r.apiAddress = localAPIAddress
	}
	return r
}

// retire moves the named static pods out of the kubelet's directory; it
// reports which it moved. A pod already moved (a restarted bootkube) is
// skipped.
func (r retirer) retire(names []string) ([]string, error) {
	if err := os.MkdirAll(r.retiredDir, 0o755); err != nil {
		return nil, err
	}
	var moved []string
	for _, name := range names {
		err := os.Rename(filepath.Join(r.staticPodDir, name), filepath.Join(r.retiredDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return moved, fmt.Errorf("retire static pod %s: %w", name, err)
		}
		moved = append(moved, name)
	}
	return moved, nil
}

// waitClosed waits until nothing accepts connections at the local API
// server's address, at most r.timeout; it reports whether it closed.
func (r retirer) waitClosed(ctx context.Context) bool {
	var d net.Dialer
	err := wait.PollUntilContextTimeout(ctx, r.every, r.timeout, true, func(ctx context.Context) (bool, error) {
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", r.apiAddress)
		dcancel()
		if c != nil {
			c.Close()
		}
		// A dial that timed out (or was cut by the wait's end) does not
		// show a closed port: only a refusal does.
		return err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded), nil
	})
	return err == nil
}

// releaseLeases deletes the leader leases the stopped bootstrap controllers
// hold, so the masters' controllers take over at their next try (2 s)
// instead of after the lease runs out (15 s): meanwhile no controller
// updated Deployments, EndpointSlices or Nodes, and install-complete
// waited. Only a lease whose holder is this machine (identity
// "<hostname>_<uuid>") is deleted, and only at the version read. The
// controllers cannot renew: their API server is stopped.
func releaseLeases(ctx context.Context, c kubernetes.Interface, node string, log logrus.FieldLogger) {
	for _, name := range release.LeaderLeases() {
		l, err := c.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				log.Warnf("cannot read the %s leader lease: %v", name, err)
			}
			continue
		}
		if l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, node+"_") {
			continue
		}
		rv := l.ResourceVersion
		err = c.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil:
			log.Infof("released the %s leader lease of the stopped bootstrap controller", name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Released or taken over meanwhile.
		default:
			log.Warnf("cannot release the %s leader lease (it runs out by itself): %v", name, err)
		}
	}
}

// stopAPI stops the bootstrap control plane (stopControlPlane) and then
// releases the controllers' leader leases through a master's API server (c).
func (g *grower) stopAPI(ctx context.Context, c kubernetes.Interface) error {
	if err := g.stopControlPlane(ctx); err != nil {
		return err
	}
	releaseLeases(ctx, c, g.cfg.NodeName, g.cfg.Log)
	return nil
}

// stopControlPlane retires the API server, controller manager and
// scheduler and waits for the API server's port to close. A port still
// open at the timeout is logged and the handover goes on: the masters serve
// anyway.
func (g *grower) stopControlPlane(ctx context.Context) error {
	r := newRetirer(g.cfg)
	moved, err := r.retire(retireBeforeRemoval())
	if err != nil {
		return err
	}
	if len(moved) > 0 {
		g.cfg.Log.Infof("stopping the bootstrap control plane (%v moved to %s)", moved, r.retiredDir)
	}
	start := time.Now()
	if !r.waitClosed(ctx) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.cfg.Log.Warnf("the bootstrap API server still accepts connections at %s after %s; handing over anyway", r.apiAddress, r.timeout)
		return nil
	}
	if len(moved) > 0 {
		g.cfg.Log.Infof("bootstrap API server stopped after %s", time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// retireFirst is the handover's first half on slower hardware
// (Config.RetireFirst): as soon as every master's etcd member votes, the
// bootstrap machine stops its control plane, hands etcd's leadership to a
// master, removes its own member and stops it, before any master's API
// server is up. The masters then start their control planes alone: on two
// emulated CPUs (the VM host test) a master's API server starting beside
// the bootstrap machine's control plane and a two-member etcd missed its
// post-start hooks' fixed timeouts again and again, and the handover never
// came. The price: no API server answers from here until a master's is
// ready (minutes there), and the bootstrap machine's etcd data is no
// longer a fallback. handOver then waits for the masters' API servers and
// records bootstrap-complete.
func (g *grower) retireFirst(ctx context.Context, masters []master) error {
	if err := g.stopControlPlane(ctx); err != nil {
		return err
	}
	if err := g.removeBootstrapMember(ctx, masters); err != nil {
		return err
	}
	g.stopEtcd()
	g.cfg.Log.Infof("bootstrap control plane and etcd member retired early (slower hardware); waiting for the API servers of %d masters", len(masters))
	return nil
}

// stopEtcd retires the bootstrap etcd member's static pod once the member
// is gone from the cluster (a removed member cannot serve or rejoin).
func (g *grower) stopEtcd() {
	r := newRetirer(g.cfg)
	if _, err := r.retire(retireAfterComplete()); err != nil {
		g.cfg.Log.Warnf("cannot stop the removed bootstrap etcd member: %v", err)
	}
}

package scale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Etcd is the etcd client a scale uses; *clientv3.Client is one.
type Etcd interface {
	etcdmembers.Client
	Close() error
}

// addMaster creates the master's machine (from the full master config: it
// holds the control plane's certificates and stages its static pods) at
// the release the cluster runs (bootRelease), waits for its Node, adds its
// etcd member as a learner and has the installer put
// the member's certificates and static pod on it, promotes the member once
// it caught up (the installer then activates the staged control plane),
// waits for its API server, and only then adds it to the load balancer; it
// ends once the Node is Ready. Every step checks what exists first, so a
// re-run after an interrupt goes on where it stopped.
func (r *Runner) addMaster(ctx context.Context, name string) error {
	rel, err := r.bootRelease(ctx, name, true)
	if err != nil {
		return err
	}
	r.Cluster.Shape.Masters = with(r.Cluster.Shape.Masters, name)
	if err := r.join(ctx, name, machines.RoleMaster, rel); err != nil {
		return err
	}
	var ip string
	if err := r.until(ctx, r.joinTimeout(), "Waiting for Node "+name+"'s address", func(ctx context.Context) (bool, string, error) {
		n, err := r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, r.machineNote(ctx, name, "not registered yet"), nil
		}
		if err != nil {
			return false, "API: " + err.Error(), nil
		}
		ip = nodeIP(n)
		return ip != "", "no InternalIP yet", nil
	}); err != nil {
		return err
	}
	if err := r.labelControlPlane(ctx, name); err != nil {
		return err
	}
	etcd, err := r.dialEtcd(ctx, name)
	if err != nil {
		return err
	}
	defer etcd.Close()
	if err := r.until(ctx, r.joinTimeout(), "Adding "+name+" to etcd as a learner and promoting it", func(ctx context.Context) (bool, string, error) {
		return r.joinStep(ctx, etcd, name, ip)
	}); err != nil {
		return err
	}
	if err := etcdmembers.DeleteInstallerSecret(ctx, r.Kube, name); err != nil {
		r.Log.Warnf("delete the etcd installer Secret of %s: %v", name, err)
	}
	if err := r.until(ctx, r.joinTimeout(), "Waiting for the API server on "+name, func(ctx context.Context) (bool, string, error) {
		if err := r.apiReady(ctx, ip); err != nil {
			return false, briefReadyz(err), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	if err := r.Machines.SetAPIBackends(ctx, r.Cluster, r.Cluster.Shape.Masters); err != nil {
		return err
	}
	// Done means Ready, as for a worker: the next command (an upgrade's
	// health check, a scale of another master) may rely on it.
	return r.waitNodeReadyAt(ctx, name, rel.Kubernetes)
}

// joinStep makes at most one change towards name being a voting member,
// as bootkube grows etcd: add it as a learner (with its certificates and
// static pod installed), then promote it once it has started and caught
// up.
func (r *Runner) joinStep(ctx context.Context, etcd Etcd, name, ip string) (bool, string, error) {
	inst := etcdmembers.PodInstaller{Kube: r.Kube, CA: r.PKI.CA, Manifest: r.PKI.Manifest, Image: r.InstallerImage, Node: name, IP: ip, Validity: r.PKI.Validity}
	p, err := etcdmembers.Join(ctx, etcd, name, etcdmembers.PeerURL(ip), inst)
	if p.Step == etcdmembers.Added {
		r.Log.Infof("etcd member %s added as a learner at %s", name, etcdmembers.PeerURL(ip))
	}
	if err != nil {
		return false, "", err
	}
	switch p.Step {
	case etcdmembers.Voting:
		return true, "", nil
	case etcdmembers.Unlisted:
		return false, "etcd member list: " + p.Err.Error(), nil
	case etcdmembers.WaitingForLearner:
		return false, "waiting for learner " + p.Learner + " before adding " + name, nil
	case etcdmembers.Added:
		return false, "added as a learner", nil
	case etcdmembers.Reinstalled:
		// A run cut short between the add and the install.
		return false, "installing the member again", nil
	case etcdmembers.NotStarted:
		return false, "learner " + name + " has not started yet", nil
	case etcdmembers.NotReady:
		return false, "learner " + name + " not ready to vote: " + p.Err.Error(), nil
	case etcdmembers.Promoted:
		r.Log.Infof("etcd member %s promoted to voter", name)
		return false, "promoted", nil
	}
	return false, "", fmt.Errorf("etcd member %s: unknown join step %d", name, p.Step)
}

// removeMaster takes a master out: out of the load balancer and the API
// VIP's announcers first (no request goes to an API server about to lose
// its etcd member), then its
// etcd member (refused when the members left would lose quorum, unless
// --force), its Node, and only then its machine. The removal is recorded
// first so that a re-run finishes it.
func (r *Runner) removeMaster(ctx context.Context, name string) error {
	if err := r.record([]string{name}); err != nil {
		return err
	}
	masters := without(r.Cluster.Shape.Masters, name)
	if err := r.Machines.SetAPIBackends(ctx, r.Cluster, masters); err != nil {
		return err
	}
	if err := r.moveVIPOff(ctx, name, masters); err != nil {
		return err
	}
	etcd, err := r.dialEtcd(ctx, name)
	if err != nil {
		return err
	}
	defer etcd.Close()
	if err := r.step("Removing the etcd member of "+name, func() error { return r.removeMember(ctx, etcd, name) }); err != nil {
		return err
	}
	if err := r.deleteNode(ctx, name); err != nil {
		return err
	}
	r.Cluster.Shape.Masters = masters
	if err := r.Machines.ApplyMachines(ctx, r.Cluster); err != nil {
		return err
	}
	if err := r.unenroll(ctx, name); err != nil {
		return err
	}
	return r.record(nil)
}

// removeMember removes name's etcd member, if it has one, after checking
// that the members left keep quorum: one must be left, and a majority of
// those left must answer, unless --force. (An even count as the result of
// a scale is refused by MakePlan; on the way from 3 to 1, or half-way
// through a replacement, it is expected.)
func (r *Runner) removeMember(ctx context.Context, etcd Etcd, name string) error {
	removed, err := etcdmembers.Remove(ctx, etcd, name, r.Force)
	if errors.Is(err, etcdmembers.ErrQuorum) {
		return fmt.Errorf("%w (--force overrides this)", err)
	}
	if err != nil {
		return err
	}
	if removed {
		r.Log.Infof("etcd member %s removed", name)
	} else {
		r.Log.Infof("%s has no etcd member (removed already)", name)
	}
	return nil
}

// dialEtcd connects to the etcd members on the masters other than skip
// (a master being removed or replaced may be dead).
func (r *Runner) dialEtcd(ctx context.Context, skip string) (Etcd, error) {
	endpoints, err := EtcdEndpoints(ctx, r.Kube, skip)
	if err != nil {
		return nil, err
	}
	return r.Etcd(endpoints)
}

// ClusterEtcd is how the host reaches a running cluster's etcd: the
// client URLs of the masters' members and the API server's etcd client
// certificate of --dir's state, with the etcd CA.
type ClusterEtcd struct {
	Endpoints     []string
	CA, Cert, Key []byte
}

// FindClusterEtcd finds the etcd of the cluster whose state is in dir,
// from the masters' Nodes of kube.
func FindClusterEtcd(ctx context.Context, dir string, kube kubernetes.Interface) (ClusterEtcd, error) {
	ca, cert, key, err := etcdmembers.ClientPKIFromState(dir)
	if err != nil {
		return ClusterEtcd{}, err
	}
	endpoints, err := EtcdEndpoints(ctx, kube, "")
	if err != nil {
		return ClusterEtcd{}, err
	}
	return ClusterEtcd{Endpoints: endpoints, CA: ca, Cert: cert, Key: key}, nil
}

// Dial connects to e's members through dial (the cluster's route).
func (e ClusterEtcd) Dial(dial etcdmembers.DialFunc) (*clientv3.Client, error) {
	c, err := etcdmembers.DialPEM(e.Endpoints, e.CA, e.Cert, e.Key, dial)
	if err != nil {
		return nil, fmt.Errorf("etcd at %v: %w", e.Endpoints, err)
	}
	return c, nil
}

// EtcdEndpoints returns the etcd client URLs of the masters other than
// skip ("" skips none), sorted, from their Nodes' internal addresses.
func EtcdEndpoints(ctx context.Context, kube kubernetes.Interface, skip string) ([]string, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodelayout.RoleLabel + "=master"})
	if err != nil {
		return nil, fmt.Errorf("list the masters: %w", err)
	}
	var endpoints []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if ip := nodeIP(n); ip != "" && n.Name != skip {
			endpoints = append(endpoints, etcdmembers.ClientURL(ip))
		}
	}
	switch {
	case len(endpoints) > 0:
	case skip == "":
		return nil, errors.New("no master has an address to reach etcd on")
	default:
		return nil, errors.New("no master other than " + skip + " has an address to reach etcd on")
	}
	slices.Sort(endpoints)
	return endpoints, nil
}

// labelControlPlane gives the master the control-plane role label, as
// bootkube does for the masters of an install.
func (r *Runner) labelControlPlane(ctx context.Context, name string) error {
	patch := []byte(`{"metadata":{"labels":{"` + handover.ControlPlaneLabel + `":""}}}`)
	_, err := r.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// apiReady asks the API server on the master at ip for /readyz, verifying
// its serving certificate by the "kubernetes" name (r.APIReady in tests).
func (r *Runner) apiReady(ctx context.Context, ip string) error {
	if r.APIReady != nil {
		return r.APIReady(ctx, ip)
	}
	c := rest.CopyConfig(r.Rest)
	c.Host = "https://" + net.JoinHostPort(ip, "6443")
	c.TLSClientConfig.ServerName = "kubernetes"
	direct, err := kubernetes.NewForConfig(c)
	if err != nil {
		return err
	}
	return direct.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// Unjoined returns the masters of shape that a previous run added but did
// not finish joining: without a voting etcd member, or not among the load
// balancer's backends.
func (r *Runner) Unjoined(ctx context.Context, shape machines.Shape) ([]string, error) {
	backends, err := r.Machines.APIBackends(ctx, r.Cluster)
	if err != nil {
		return nil, err
	}
	etcd, err := r.dialEtcd(ctx, "")
	if err != nil {
		return nil, err
	}
	defer etcd.Close()
	list, err := etcd.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd member list: %w", err)
	}
	var out []string
	for _, n := range shape.Masters {
		if m := etcdmembers.ByName(list.Members, n); m == nil || m.IsLearner || !slices.Contains(backends, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// failedCheck matches a failed check in a /readyz answer.
var failedCheck = regexp.MustCompile(`\[-\]([A-Za-z0-9/_.-]+) failed`)

// briefReadyz says why /readyz failed in one short line: the failed
// checks, or the start of the error.
func briefReadyz(err error) string {
	var failed []string
	for _, m := range failedCheck.FindAllStringSubmatch(err.Error(), -1) {
		failed = append(failed, strings.TrimPrefix(m[1], "poststarthook/"))
	}
	if len(failed) > 0 {
		return "/readyz: failing " + strings.Join(failed, ", ")
	}
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return "/readyz: " + msg
}

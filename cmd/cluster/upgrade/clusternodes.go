package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/apivip"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/cmd/cluster/noderelease"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
	"github.com/kiln-project/kiln/platforms"
)

// ClusterNodes is Nodes on a running cluster: the platform's Upgrader
// stages a release's payload on a node, the node's machine-config agent
// changes what it runs, the API and etcd say whether it is healthy.
type ClusterNodes struct {
	// Cluster is the cluster as loaded from --dir.
	Cluster  *platforms.Cluster
	Upgrader platforms.Upgrader
	// Backends sets the API load balancer's masters.
	Backends platforms.Scaler
	Kube     kubernetes.Interface
	// Etcd is a client of every member, for CaughtUp.
	Etcd etcdmembers.Client
	// EtcdClusterVersion asks the members for etcd's cluster version
	// ("3.6.0", etcdmembers.ClusterVersion), before a member is put back
	// a minor.
	EtcdClusterVersion func(ctx context.Context) (string, error)
	// Drainer cordons and drains a node within --drain-timeout.
	Drainer func(ctx context.Context, node string) error
	// Now is the clock leader leases are read against; time.Now when nil.
	Now func() time.Time
}

var _ Nodes = (*ClusterNodes)(nil)

// releaseOf is the pinned release whose c runs v.
func releaseOf(c Component, v release.Version) (release.Release, error) {
	for _, r := range release.Releases() {
		if targets(r)[c] == v {
			return r, nil
		}
	}
	return release.Release{}, fmt.Errorf("no release kiln pins runs %s %s", c, display(c, v))
}

// Apply makes c on node: a node component (etcd, the API server,
// controller manager and scheduler of a master, a kubelet) through the
// node's machine-config agent, which takes the release's payload the
// platform stages on the node (a kubelet step also imports the add-ons'
// images, for the step after the kubelets); an add-on's workload names its
// new image.
func (n *ClusterNodes) Apply(ctx context.Context, node string, c Change) error {
	r, err := releaseOf(c.Component, c.To)
	if err != nil {
		return err
	}
	switch {
	case onNode(c.Component):
		if err := n.Upgrader.StageRelease(ctx, n.Cluster, node, r.Kubernetes); err != nil {
			return fmt.Errorf("staging the payload of %s on %s: %w", r.Kubernetes, node, err)
		}
		return noderelease.Ask(ctx, n.Kube, node, map[string]string{string(c.Component): r.Kubernetes})
	case c.Component == KubeProxy || c.Component == CoreDNS:
		return n.setAddonImage(ctx, c.Component, r.Image(release.Component(c.Component)))
	}
	return fmt.Errorf("kiln cannot change %s", c.Component)
}

// onNode reports whether c runs on a node, made so by the node's agent
// (noderelease), rather than as a cluster workload.
func onNode(c Component) bool {
	switch c {
	case Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kubelet:
		return true
	}
	return false
}

// Rollback applies c backwards; an etcd member is not put back a minor
// once etcd's cluster version has reached c.To (etcdCanGoBack).
func (n *ClusterNodes) Rollback(ctx context.Context, node string, c Change) error {
	if c.Component == Etcd && c.To.Minors(c.From) > 0 {
		if err := n.etcdCanGoBack(ctx, c); err != nil {
			return err
		}
	}
	return n.Apply(ctx, node, Change{Component: c.Component, From: c.To, To: c.From})
}

// etcdCanGoBack is an *IrreversibleError once etcd's cluster version has
// reached c.To's minor. The leader raises it when every member runs that
// minor; each member then migrates its storage to it, and a member of the
// minor before refuses to start ("cluster cannot be downgraded"). Only
// etcd's downgrade API, member by member, or the snapshot go back from
// there. Before that (the last member has not run c.To long enough for
// the leader to see it) the old binary rejoins as it left.
func (n *ClusterNodes) etcdCanGoBack(ctx context.Context, c Change) error {
	if n.EtcdClusterVersion == nil {
		return errors.New("etcd's cluster version cannot be asked here: an etcd member is not put back a minor without it")
	}
	s, err := n.EtcdClusterVersion(ctx)
	if err != nil {
		return fmt.Errorf("etcd's cluster version, which decides whether etcd %s can come back: %w", display(Etcd, c.From), err)
	}
	cv, err := release.ParseVersion(s)
	if err != nil {
		return fmt.Errorf("etcd's cluster version: %w", err)
	}
	if cv.Minors(c.From) <= 0 {
		return nil
	}
	return &IrreversibleError{Why: fmt.Sprintf("etcd's cluster version is %s: every member has run etcd %d.%d, and an etcd %s member cannot rejoin the cluster (docs/upgrade.md, \"etcd 3.5 to 3.6\")",
		etcdString(cv), cv.Major, cv.Minor, display(Etcd, c.From))}
}

// Check reports whether c runs c.To on node and is healthy.
func (n *ClusterNodes) Check(ctx context.Context, node string, c Change) error {
	r, err := releaseOf(c.Component, c.To)
	if err != nil {
		return err
	}
	if onNode(c.Component) {
		if err := noderelease.Applied(ctx, n.Kube, node); err != nil {
			return err
		}
	}
	switch c.Component {
	case Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler:
		pod, err := n.Kube.CoreV1().Pods(Namespace).Get(ctx, string(c.Component)+"-"+node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := r.Image(release.Component(c.Component))
		if got := scale.ContainerImage(pod.Spec.Containers, string(c.Component)); got != want {
			return fmt.Errorf("pod %s runs %s, not %s yet", pod.Name, got, want)
		}
		if why := podNotReady(*pod); why != "" {
			return fmt.Errorf("pod %s: %s", pod.Name, why)
		}
		if c.Component == Etcd {
			if ok, why := etcdmembers.CaughtUp(ctx, n.Etcd, node); !ok {
				return fmt.Errorf("etcd member %s: %s", node, why)
			}
		}
		return nil
	case Kubelet:
		nd, err := n.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := parseOrZero(nd.Status.NodeInfo.KubeletVersion); got != c.To {
			return fmt.Errorf("node %s reports kubelet %s", node, nd.Status.NodeInfo.KubeletVersion)
		}
		if why := notReady(nd.Status.Conditions, string(corev1.NodeReady)); why != "" {
			return fmt.Errorf("node %s: %s", node, why)
		}
		if _, master := nd.Labels[handover.ControlPlaneLabel]; master {
			// A new kubelet may restart the static pods: the next step
			// starts with this master's control plane Ready again.
			pods, err := n.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: controlPlaneSelector})
			if err != nil {
				return err
			}
			if problems := controlPlaneProblems(node, pods.Items); len(problems) > 0 {
				return errors.New(strings.Join(problems, "; "))
			}
			// A controller manager or scheduler the new kubelet
			// restarted may have been the leader: the next step drains
			// a node, and without a controller manager leading no
			// endpoint follows an evicted pod.
			if err := n.leadersActive(ctx); err != nil {
				return err
			}
		}
		return nil
	case KubeProxy:
		ds, err := n.Kube.AppsV1().DaemonSets(Namespace).Get(ctx, scale.KubeProxyDaemonSet, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if got, want := scale.ContainerImage(ds.Spec.Template.Spec.Containers, scale.KubeProxyDaemonSet), r.Image(release.KubeProxy); got != want {
			return fmt.Errorf("DaemonSet kube-proxy names %s, not %s", got, want)
		}
		if st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberAvailable != st.DesiredNumberScheduled {
			return fmt.Errorf("DaemonSet kube-proxy: %d of %d pods updated, %d available", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberAvailable)
		}
		return nil
	case CoreDNS:
		d, err := n.Kube.AppsV1().Deployments(Namespace).Get(ctx, scale.CoreDNSDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := d.Status
		if got, want := scale.ContainerImage(d.Spec.Template.Spec.Containers, scale.CoreDNSDeployment), r.Image(release.CoreDNS); got != want {
			return fmt.Errorf("Deployment coredns names %s, not %s", got, want)
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
			return fmt.Errorf("Deployment coredns: %d of %d replicas updated, %d available", st.UpdatedReplicas, want, st.AvailableReplicas)
		}
		return nil
	}
	return fmt.Errorf("kiln cannot check %s", c.Component)
}

// leaderRenewal is how recently an active leader has renewed its lease:
// kiln's control plane renews every 2 s (--leader-elect-retry-period), and
// a dead leader's lease stays held until it expires (60 s).
const leaderRenewal = 10 * time.Second

// leadersActive returns an error naming a leader lease that no live
// leader renewed within leaderRenewal. A lease that does not exist (no
// leader election) passes.
func (n *ClusterNodes) leadersActive(ctx context.Context) error {
	now := time.Now
	if n.Now != nil {
		now = n.Now
	}
	for _, name := range release.LeaderLeases() {
		l, err := n.Kube.CoordinationV1().Leases(Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime == nil || holder == "" {
			return fmt.Errorf("no %s leads yet (lease %s/%s has no holder)", name, Namespace, name)
		}
		if age := now().Sub(l.Spec.RenewTime.Time); age > leaderRenewal {
			return fmt.Errorf("no %s leads: lease %s/%s was last renewed %s ago by %s", name, Namespace, name, age.Round(time.Second), holder)
		}
	}
	return nil
}

// setAddonImage points the kube-proxy DaemonSet's or the CoreDNS
// Deployment's container at ref.
func (n *ClusterNodes) setAddonImage(ctx context.Context, c Component, ref string) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, string(c), ref))
	var err error
	if c == KubeProxy {
		_, err = n.Kube.AppsV1().DaemonSets(Namespace).Patch(ctx, scale.KubeProxyDaemonSet, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = n.Kube.AppsV1().Deployments(Namespace).Patch(ctx, scale.CoreDNSDeployment, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("setting the image of %s: %w", c, err)
	}
	return nil
}

// Drain cordons and drains node.
func (n *ClusterNodes) Drain(ctx context.Context, node string) error { return n.Drainer(ctx, node) }

// Uncordon makes node schedulable again, retrying for up to noderelease.APIRetry
// while the API does not answer.
func (n *ClusterNodes) Uncordon(ctx context.Context, node string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, noderelease.APIRetry, true, func(ctx context.Context) (bool, error) {
		_, last = n.Kube.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{})
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// APIBackend takes master out of the API load balancer or puts it back;
// it never leaves the load balancer without a master. Where kiln keeps an
// API VIP, master leaves and rejoins the VIP's announcers the same way
// (apivip.Mover), out of the load balancer first and back into it last.
func (n *ClusterNodes) APIBackend(ctx context.Context, master string, serve bool) error {
	cur, err := n.Backends.APIBackends(ctx, n.Cluster)
	if err != nil {
		return err
	}
	want := slices.DeleteFunc(slices.Clone(cur), func(m string) bool { return m == master })
	if serve {
		want = append(want, master)
	}
	slices.Sort(want)
	if len(want) == 0 {
		// A single master's API server restarts behind the load
		// balancer: there is no other to send its clients to.
		return nil
	}
	if !slices.Equal(want, slices.Sorted(slices.Values(cur))) {
		if err := n.Backends.SetAPIBackends(ctx, n.Cluster, want); err != nil {
			return err
		}
	}
	if configs.Addons(n.Cluster.Config).APIVIP == "" {
		return nil
	}
	vip := apivip.Mover{Kube: n.Kube}
	if serve {
		return vip.On(ctx, master)
	}
	return vip.Off(ctx, master, want)
}

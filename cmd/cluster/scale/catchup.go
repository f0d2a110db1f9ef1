package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/noderelease"
	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// controlPlane returns a master's static pods, etcd first; the others are
// staged by its Ignition config until its member votes.
func controlPlane() []release.Component {
	return []release.Component{release.Etcd, release.KubeAPIServer, release.KubeControllerManager, release.KubeScheduler}
}

// The cluster-wide workloads whose images follow the release, in
// kube-system: every node runs kube-proxy, any may run CoreDNS.
const (
	// KubeProxyDaemonSet runs kube-proxy on every node.
	KubeProxyDaemonSet = "kube-proxy"
	// CoreDNSDeployment runs the cluster DNS.
	CoreDNSDeployment = "coredns"
)

// runningRelease is what a cluster's nodes but one run: the kubelet
// version they report and the image of each component.
type runningRelease struct {
	// Kubelet is the version every other node's kubelet reports; "" when
	// there is no other node.
	Kubelet string
	// Images maps a component to the image every other master runs (the
	// control plane) or the cluster's workload names (the add-ons).
	Images map[release.Component]string
}

// catchUp brings the new machine node to the release the cluster runs,
// when that is not the one its node image holds: a cluster upgraded since
// it was created runs a newer release than the image its new machines
// boot from. Once the node registered, its machine-config agent is asked
// for the running release (noderelease) of its kubelet (with every image
// of that release, as an upgrade's kubelet step) and, on a master, of its
// staged control plane, from the payload the platform stages on the node;
// the etcd static pod kiln's installer writes names the members' image.
// Without it a new master ran an older API server than the kubelets,
// which the skew policy forbids, an older etcd member could not join
// members past its minor (docs/upgrade.md, "etcd 3.5 to 3.6"), and
// kube-proxy could not start on a new worker. A re-run asks again for
// what the node runs already, which changes nothing.
func (r *Runner) catchUp(ctx context.Context, node string, master bool) error {
	run, err := r.running(ctx, node, master)
	if err != nil {
		return err
	}
	n, err := r.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Node %s: %w", node, err)
	}
	own := n.Status.NodeInfo.KubeletVersion
	base, err := release.Lookup(own)
	if err != nil {
		return fmt.Errorf("Node %s reports kubelet %q: %w", node, own, err)
	}
	if img, ok := run.Images[release.Etcd]; ok {
		if _, err := release.WithImage(release.Etcd, img); err != nil {
			return fmt.Errorf("the cluster runs %s: %w", img, err)
		}
		manifest, err := release.Retag([]byte(r.PKI.Manifest), release.Etcd, img)
		if err != nil {
			return fmt.Errorf("the masters' etcd static pod: %w", err)
		}
		r.PKI.Manifest = string(manifest)
	}
	want := machineconfig.NodeRelease{}
	kubelet := base
	if run.Kubelet != "" && run.Kubelet != own {
		if kubelet, err = release.Lookup(run.Kubelet); err != nil {
			return fmt.Errorf("the nodes' kubelets run %s: %w", run.Kubelet, err)
		}
		want[machineconfig.Kubelet] = kubelet.Kubernetes
	}
	for _, c := range sortedComponents(run.Images) {
		img := run.Images[c]
		switch {
		case c == release.Etcd || img == base.Image(c):
		case c == release.KubeProxy || c == release.CoreDNS:
			// The kubelet's release brings the add-ons' images.
			if img != kubelet.Image(c) {
				return fmt.Errorf("the cluster runs %s while its kubelets run %s: an upgrade is under way; finish it with kiln upgrade cluster first", img, kubelet.Kubernetes)
			}
		default:
			rel, err := release.WithImage(c, img)
			if err != nil {
				return fmt.Errorf("the cluster runs %s: %w", img, err)
			}
			want[string(c)] = rel.Kubernetes
		}
	}
	if len(want) == 0 {
		return nil
	}
	if r.Upgrader == nil {
		return fmt.Errorf("the cluster runs %s, which the node image of %s lacks, and platform %s cannot stage a release on a machine",
			want, node, r.Cluster.Config.PlatformName())
	}
	// The images come before the node is Ready, not after: a new worker
	// is Ready only once its pod network is configured, which its node
	// agent does after kube-proxy synced (or a minute went by), and its
	// kube-proxy cannot start before its image is there.
	for _, v := range slices.Compact(slices.Sorted(maps.Values(want))) {
		if err := r.Upgrader.StageRelease(ctx, r.Cluster, node, v); err != nil {
			return fmt.Errorf("staging the payload of %s on %s: %w", v, node, err)
		}
	}
	if err := noderelease.Ask(ctx, r.Kube, node, want); err != nil {
		return err
	}
	if err := r.until(ctx, r.joinTimeout(), "Bringing "+node+" to the release the cluster runs", func(ctx context.Context) (bool, string, error) {
		if err := noderelease.Applied(ctx, r.Kube, node); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	r.Log.Infof("%s runs %s, as the cluster does (its node image has %s)", node, want, own)
	return nil
}

// running reads what the cluster's nodes other than node run: their
// kubelets, the add-ons' images and, for a master, the other masters'
// control-plane images. Nodes or masters that run different versions are
// an upgrade under way, which must end first: the new node would join at
// one of two releases.
func (r *Runner) running(ctx context.Context, node string, master bool) (runningRelease, error) {
	run := runningRelease{Images: map[release.Component]string{}}
	var errs []error
	nodes, err := r.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return run, fmt.Errorf("listing the Nodes: %w", err)
	}
	kubelets := map[string][]string{}
	for _, n := range nodes.Items {
		if n.Name != node {
			v := n.Status.NodeInfo.KubeletVersion
			kubelets[v] = append(kubelets[v], n.Name)
		}
	}
	run.Kubelet, err = oneOf("the nodes' kubelets", kubelets)
	errs = append(errs, err)
	if master {
		pods, err := r.Kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane"})
		if err != nil {
			return run, fmt.Errorf("listing the control-plane pods: %w", err)
		}
		for _, c := range controlPlane() {
			images := map[string][]string{}
			for _, p := range pods.Items {
				if p.Spec.NodeName == node || p.Labels["component"] != string(c) {
					continue
				}
				if img := ContainerImage(p.Spec.Containers, string(c)); img != "" {
					images[img] = append(images[img], p.Spec.NodeName)
				}
			}
			img, err := oneOf("the "+string(c)+" pods", images)
			errs = append(errs, err)
			if img != "" {
				run.Images[c] = img
			}
		}
	}
	addons, err := r.addonImages(ctx)
	if err != nil {
		return run, err
	}
	for c, img := range addons {
		run.Images[c] = img
	}
	return run, errors.Join(errs...)
}

// addonImages returns the images of kube-proxy and CoreDNS their
// workloads name; one not there is left out.
func (r *Runner) addonImages(ctx context.Context) (map[release.Component]string, error) {
	images := map[release.Component]string{}
	ds, err := r.Kube.AppsV1().DaemonSets("kube-system").Get(ctx, KubeProxyDaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading the kube-proxy DaemonSet: %w", err)
	default:
		if img := ContainerImage(ds.Spec.Template.Spec.Containers, string(release.KubeProxy)); img != "" {
			images[release.KubeProxy] = img
		}
	}
	dep, err := r.Kube.AppsV1().Deployments("kube-system").Get(ctx, CoreDNSDeployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading the CoreDNS Deployment: %w", err)
	default:
		if img := ContainerImage(dep.Spec.Template.Spec.Containers, string(release.CoreDNS)); img != "" {
			images[release.CoreDNS] = img
		}
	}
	return images, nil
}

// oneOf returns the one key of where (a version or image, mapped to the
// nodes that run it); "" when where is empty, and an error naming every
// version and its nodes when there are several.
func oneOf(what string, where map[string][]string) (string, error) {
	if len(where) > 1 {
		var runs []string
		for v, nodes := range where {
			slices.Sort(nodes)
			runs = append(runs, v+" on "+strings.Join(nodes, ", "))
		}
		slices.Sort(runs)
		return "", fmt.Errorf("%s run different versions (%s): an upgrade is under way; finish it with kiln upgrade cluster first", what, strings.Join(runs, "; "))
	}
	for v := range where {
		return v, nil
	}
	return "", nil
}

// ContainerImage is the image of the container named name, else of the
// first container; "" when there is none.
func ContainerImage(cs []corev1.Container, name string) string {
	for _, c := range cs {
		if c.Name == name {
			return c.Image
		}
	}
	if len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// sortedComponents returns the keys of images in a fixed order.
func sortedComponents(images map[release.Component]string) []release.Component {
	cs := make([]release.Component, 0, len(images))
	for c := range images {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}

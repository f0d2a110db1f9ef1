package scale

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
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
// boot from. Once the node registered, its kubelet is replaced by the
// running one (with every image of that release, as an upgrade's kubelet
// step), any image the cluster runs that the node lacks is loaded, and on
// a master the etcd static pod kiln installs and the staged (or, on a
// re-run, active) control-plane manifests are retagged. Without it a new
// master ran an older API server than the kubelets, which the skew policy
// forbids, an older etcd member
// could not join members past its minor (docs/upgrade.md, "etcd 3.5 to
// 3.6"), and kube-proxy could not start on a new worker. Every part is
// idempotent, and a re-run skips the kubelet and manifests done.
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
	kubelet := run.Kubelet != "" && run.Kubelet != own
	comps := sortedComponents(run.Images)
	need := ""
	if kubelet {
		need = "kubelet " + run.Kubelet
	} else if i := slices.IndexFunc(comps, func(c release.Component) bool { return run.Images[c] != base.Image(c) }); i >= 0 {
		need = run.Images[comps[i]]
	}
	// Images are loaded before the node is Ready, not after: a new worker
	// is Ready only once its pod network is configured, which its node
	// agent does after kube-proxy synced (or a minute went by), and its
	// kube-proxy cannot start before its image is loaded. The first-boot
	// containerd restart that follows the pod network may come in the
	// middle of a load; the platform's load retries through it.
	if need != "" {
		if err := r.canLoad(node, need); err != nil {
			return err
		}
	}
	if kubelet {
		rel, err := release.Lookup(run.Kubelet)
		if err != nil {
			return fmt.Errorf("the nodes' kubelets run %s: %w", run.Kubelet, err)
		}
		if err := r.Upgrader.LoadRelease(ctx, r.Cluster.InfraID, node, rel.Kubernetes, rel.Components()); err != nil {
			return fmt.Errorf("loading the images of %s onto %s: %w", rel.Kubernetes, node, err)
		}
		if err := r.Upgrader.InstallKubelet(ctx, r.Cluster.InfraID, node, rel.Kubernetes); err != nil {
			return fmt.Errorf("installing kubelet %s on %s: %w", rel.Kubernetes, node, err)
		}
		if err := r.waitNodeReadyAt(ctx, node, rel.Kubernetes); err != nil {
			return err
		}
		r.Log.Infof("%s runs kubelet %s, as the other nodes do (its node image has %s)", node, rel.Kubernetes, own)
		base = rel
	}
	for _, c := range comps {
		img := run.Images[c]
		if img == base.Image(c) {
			continue
		}
		rel, err := release.WithImage(c, img)
		if err != nil {
			return fmt.Errorf("the cluster runs %s: %w", img, err)
		}
		if err := r.Upgrader.LoadRelease(ctx, r.Cluster.InfraID, node, rel.Kubernetes, []release.Component{c}); err != nil {
			return fmt.Errorf("loading %s onto %s: %w", img, node, err)
		}
		r.Log.Infof("%s has %s, as the cluster runs it", node, img)
	}
	if !master {
		return nil
	}
	return r.retagControlPlane(ctx, node, run.Images)
}

// canLoad is an error naming what node lacks when the platform cannot put
// images and binaries on a machine.
func (r *Runner) canLoad(node, what string) error {
	if r.Upgrader != nil {
		return nil
	}
	return fmt.Errorf("the cluster runs %s, which the node image of %s lacks, and platform %s cannot load it onto a machine",
		what, node, r.Cluster.Config.PlatformName())
}

// retagControlPlane names the running images in the new master's etcd
// static pod (the one kiln's installer writes) and in its control-plane
// manifests: the staged ones, and the active ones when a run cut short
// after the installer activated them left them older.
func (r *Runner) retagControlPlane(ctx context.Context, node string, images map[release.Component]string) error {
	if img, ok := images[release.Etcd]; ok {
		manifest, err := release.Retag([]byte(r.PKI.Manifest), release.Etcd, img)
		if err != nil {
			return fmt.Errorf("the masters' etcd static pod: %w", err)
		}
		r.PKI.Manifest = string(manifest)
	}
	if r.Upgrader == nil {
		// The platform cannot change a machine's files, and need not:
		// canLoad refused any image other than the node's own release's,
		// which its manifests name.
		return nil
	}
	for _, c := range controlPlane()[1:] {
		img, ok := images[c]
		if !ok {
			continue
		}
		for _, dir := range []string{nodelayout.StagedPodDir, nodelayout.StaticPodDir} {
			file := path.Join(dir, string(c)+".yaml")
			old, err := r.Upgrader.ReadNodeFile(ctx, r.Cluster.InfraID, node, file)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading %s on %s: %w", file, node, err)
			}
			manifest, err := release.Retag(old, c, img)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", file, node, err)
			}
			if string(manifest) == string(old) {
				continue
			}
			if err := r.Upgrader.WriteNodeFile(ctx, r.Cluster.InfraID, node, file, manifest, 0o644); err != nil {
				return fmt.Errorf("writing %s on %s: %w", file, node, err)
			}
			r.Log.Infof("%s on %s names %s, as the other masters run", file, node, img)
		}
	}
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

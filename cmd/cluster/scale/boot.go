package scale

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition"
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

// bootRelease returns the release machine node, about to be added, boots
// straight into, and records it in the cluster's Releases when it is not
// the install-config's: the release the cluster runs, which an upgrade
// may have moved since the cluster was created. The platform creates the
// machine from that release's node image (local) or system extension
// (ssh), and its config names that release's images (withRelease), so no
// step after its boot changes its release: a new master never runs an
// API server older than the kubelets (which the skew policy forbids), nor
// an etcd older than the members' minor (docs/upgrade.md, "etcd 3.5 to
// 3.6"), and kube-proxy finds its image on a new worker.
//
// The release is the one every other node's kubelet runs (the
// install-config's when there is no other node); the add-ons and, for a
// master, the other masters' control plane must run its images. Anything
// else is an upgrade under way, which must end first: the machine would
// join at one of two releases. For a master, the etcd static pod its
// installer writes is pointed at the release's etcd.
func (r *Runner) bootRelease(ctx context.Context, node string, master bool) (release.Release, error) {
	run, err := r.running(ctx, node, master)
	if err != nil {
		return release.Release{}, err
	}
	rel := r.Cluster.Resolved.Release
	if run.Kubelet != "" {
		if rel, err = release.Lookup(run.Kubelet); err != nil {
			return release.Release{}, fmt.Errorf("the nodes' kubelets run %s: %w", run.Kubelet, err)
		}
	}
	var errs []error
	for _, c := range sortedComponents(run.Images) {
		if img := run.Images[c]; img != rel.Image(c) {
			errs = append(errs, fmt.Errorf("the cluster runs %s while its kubelets run %s, whose %s is %s: an upgrade is under way; finish it with kiln upgrade cluster first",
				img, rel.Kubernetes, c, rel.Image(c)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return release.Release{}, err
	}
	if master {
		manifest, err := release.Retag([]byte(r.PKI.Manifest), release.Etcd, rel.Image(release.Etcd))
		if err == nil {
			manifest, err = release.WithEtcdSnapshotCount(manifest)
		}
		if err != nil {
			return release.Release{}, fmt.Errorf("the masters' etcd static pod: %w", err)
		}
		r.PKI.Manifest = string(manifest)
	}
	if rel.Kubernetes == r.Cluster.Resolved.Release.Kubernetes {
		delete(r.Cluster.Releases, node)
	} else {
		if r.Cluster.Releases == nil {
			r.Cluster.Releases = map[string]string{}
		}
		r.Cluster.Releases[node] = rel.Kubernetes
		r.Log.Infof("%s boots Kubernetes %s, the release the cluster runs (it was created at %s)", node, rel.Kubernetes, r.Cluster.Resolved.Release.Kubernetes)
	}
	return rel, nil
}

// withRelease returns the full config full with every control-plane
// static pod it holds (active or staged) pointed at rel's images.
func withRelease(full []byte, rel release.Release) ([]byte, error) {
	cfg, err := ignition.Parse(full)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, f := range slices.Clone(cfg.Storage.Files) {
		dir, base := path.Split(f.Path)
		c := release.Component(strings.TrimSuffix(base, ".yaml"))
		if dir != nodelayout.StaticPodDir+"/" && dir != nodelayout.StagedPodDir+"/" || !slices.Contains(controlPlane(), c) {
			continue
		}
		data, _, err := ignition.FileContents(cfg, f.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		if data, err = release.Retag(data, c, rel.Image(c)); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		mode := 0o644
		if f.Mode != nil {
			mode = *f.Mode
		}
		ignition.AddFile(&cfg, f.Path, mode, data)
		changed = true
	}
	if !changed {
		return full, nil
	}
	return ignition.Marshal(cfg)
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

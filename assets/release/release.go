package release

import "fmt"

// Pinned versions. Changing one of them changes the node image's cache key,
// so the next `kiln build node-image` rebuilds what depends on it.
const (
	// KubernetesVersion is the k8s.io/kubernetes module version that every
	// Kubernetes binary is built from and reports with --version.
	KubernetesVersion = "v1.36.3"
	// KubernetesStagingVersion is the version of the k8s.io/<staging>
	// modules (k8s.io/api, k8s.io/client-go, ...) matching KubernetesVersion.
	KubernetesStagingVersion = "v0.36.3"
	// EtcdVersion is the go.etcd.io/etcd/server/v3 and etcdctl/v3 version.
	EtcdVersion = "v3.5.35"
	// CoreDNSVersion is the github.com/coredns/coredns module version.
	CoreDNSVersion = "v1.15.0"
	// PauseVersion is the version (and image tag) of kiln's pause program.
	PauseVersion = "3.10"
	// LocalPathProvisionerVersion is the github.com/rancher/local-path-provisioner
	// module version: the default StorageClass's provisioner.
	LocalPathProvisionerVersion = "v0.0.30"
	// MetricsServerVersion is the sigs.k8s.io/metrics-server module version.
	MetricsServerVersion = "v0.9.0"
	// KubeRouterVersion is the github.com/cloudnativelabs/kube-router/v2
	// module version whose network policy controller enforces
	// NetworkPolicies (the newest the module proxy serves).
	KubeRouterVersion = "v2.1.0"
	// ContainerdVersion is the github.com/containerd/containerd/v2 module
	// version that containerd, its runc shim and ctr are built from. The
	// node reports it (without the "v") as its container runtime version,
	// containerd://2.x.y.
	ContainerdVersion = "v2.4.2"
	// RuncVersion is the github.com/opencontainers/runc module version.
	RuncVersion = "v1.5.2"
	// RegistryVersion is the github.com/distribution/distribution/v3 module
	// version of the local platform's registry add-on. The registry runs on
	// the host, not in the node image, so this pin is not part of the
	// image's cache key.
	RegistryVersion = "v3.1.2"
	// DebianSuite is the Debian release the node image is bootstrapped from.
	DebianSuite = "bookworm"
	// Registry is the registry part of every image reference. Nothing is
	// pulled from it: images are imported into containerd on each node.
	Registry = "kiln.local"
	// BinDir is where binaries live, both on the node and inside images.
	BinDir = "/usr/local/bin"
)

// Component names a container image the cluster runs. Its string is the
// image's repository name and the name of its main binary.
type Component string

// The images kiln builds. The list is closed: Image panics for any other
// value, because that is a programming error, not an input error.
const (
	// KubeAPIServer is the Kubernetes API server.
	KubeAPIServer Component = "kube-apiserver"
	// KubeControllerManager is the Kubernetes controller manager.
	KubeControllerManager Component = "kube-controller-manager"
	// KubeScheduler is the Kubernetes scheduler.
	KubeScheduler Component = "kube-scheduler"
	// KubeProxy is the service proxy (nftables mode); its image also holds
	// iptables, ip6tables and conntrack.
	KubeProxy Component = "kube-proxy"
	// Etcd is the etcd server; its image also holds etcdctl.
	Etcd Component = "etcd"
	// CoreDNS is the cluster DNS server.
	CoreDNS Component = "coredns"
	// Pause is the pod sandbox image (containerd's sandbox_image).
	Pause Component = "pause"
	// LocalPathProvisioner provisions node-local PersistentVolumes; its
	// image also holds local-path-helper, the program its helper pods run
	// to create and remove volume directories.
	LocalPathProvisioner Component = "local-path-provisioner"
	// MetricsServer serves the resource metrics API (metrics.k8s.io).
	MetricsServer Component = "metrics-server"
	// KubeRouter enforces NetworkPolicies: kube-router with only its
	// network policy controller running (iptables and ipset); its image
	// also holds iptables, ip6tables and ipset.
	KubeRouter Component = "kube-router"
)

// ImageSpec describes one image: its component, tag and the binaries built
// by kiln that it contains (all under BinDir; the first is the entrypoint).
type ImageSpec struct {
	Component Component
	Tag       string
	Binaries  []string
}

// Ref returns the image reference, e.g. "kiln.local/etcd:v3.5.35".
func (s ImageSpec) Ref() string {
	return fmt.Sprintf("%s/%s:%s", Registry, s.Component, s.Tag)
}

// Entrypoint returns the image's entrypoint: its first binary.
func (s ImageSpec) Entrypoint() string {
	return BinDir + "/" + s.Binaries[0]
}

// images is the immutable image table; Images returns copies of it.
var images = [...]ImageSpec{
	{Component: Pause, Tag: PauseVersion, Binaries: []string{"pause"}},
	{Component: Etcd, Tag: EtcdVersion, Binaries: []string{"etcd", "etcdctl"}},
	{Component: KubeAPIServer, Tag: KubernetesVersion, Binaries: []string{"kube-apiserver"}},
	{Component: KubeControllerManager, Tag: KubernetesVersion, Binaries: []string{"kube-controller-manager"}},
	{Component: KubeScheduler, Tag: KubernetesVersion, Binaries: []string{"kube-scheduler"}},
	{Component: KubeProxy, Tag: KubernetesVersion, Binaries: []string{"kube-proxy"}},
	{Component: CoreDNS, Tag: CoreDNSVersion, Binaries: []string{"coredns"}},
	{Component: LocalPathProvisioner, Tag: LocalPathProvisionerVersion, Binaries: []string{"local-path-provisioner", "local-path-helper"}},
	{Component: MetricsServer, Tag: MetricsServerVersion, Binaries: []string{"metrics-server"}},
	{Component: KubeRouter, Tag: KubeRouterVersion, Binaries: []string{"kube-router"}},
}

// Images returns every image kiln builds, in a fixed order. The result is
// a fresh copy that the caller may modify.
func Images() []ImageSpec {
	out := make([]ImageSpec, len(images))
	for i, s := range images {
		s.Binaries = append([]string(nil), s.Binaries...)
		out[i] = s
	}
	return out
}

// Spec returns the image description of c.
func Spec(c Component) ImageSpec {
	for _, s := range Images() {
		if s.Component == c {
			return s
		}
	}
	panic(fmt.Sprintf("release: unknown component %q", string(c)))
}

// Image returns the image reference of c, e.g.
// Image(KubeAPIServer) == "kiln.local/kube-apiserver:v1.36.3".
func Image(c Component) string {
	return Spec(c).Ref()
}

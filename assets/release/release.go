package release

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Pinned versions shared by every release. Changing one of them changes the
// node images' cache keys, so the next `kiln build node-image` rebuilds
// what depends on it. The versions that change with Kubernetes are in
// Releases.
const (
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
	// MetalLBVersion is the go.universe.tf/metallb module version of the
	// ssh platform's LoadBalancer add-on (controller and speaker). v0.16.2
	// needs github.com/metallb/frr-k8s v0.0.27, which the module proxy does
	// not serve; v0.15.2's v0.0.20 is.
	MetalLBVersion = "v0.15.2"
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
	// Etcd is the etcd server; its image also holds etcdctl and etcdutl
	// (etcd 3.6's `snapshot restore` is in etcdutl only).
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
	// MetalLB gives LoadBalancer Services of an ssh cluster their
	// addresses: its image holds MetalLB's controller, shipped as metallb
	// (the entrypoint), which assigns them, and its speaker,
	// metallb-speaker, which announces each from one node (ARP).
	MetalLB Component = "metallb"
)

// LeaderLeases returns the names of the leader election leases (namespace
// kube-system) of the components that elect a leader: the controller
// manager and the scheduler.
func LeaderLeases() []string {
	return []string{string(KubeControllerManager), string(KubeScheduler)}
}

// ImageSpec describes one image: its component, tag and the binaries built
// by kiln that it contains (all under BinDir; the first is the entrypoint).
type ImageSpec struct {
	Component Component
	Tag       string
	Binaries  []string
}

// Ref returns the image reference, e.g. "kiln.local/etcd:v3.6.16".
func (s ImageSpec) Ref() string {
	return fmt.Sprintf("%s/%s:%s", Registry, s.Component, s.Tag)
}

// Entrypoint returns the image's entrypoint: its first binary.
func (s ImageSpec) Entrypoint() string {
	return BinDir + "/" + s.Binaries[0]
}

// Release is one Kubernetes release kiln installs: the versions that change
// with it. Everything else (pause, the add-ons, containerd, runc, Debian) is
// shared by every release. Each release has a node image of its own in the
// cache, keyed by all of its versions.
type Release struct {
	// Kubernetes is the k8s.io/kubernetes module version that every
	// Kubernetes binary is built from and reports with --version.
	Kubernetes string
	// KubernetesStaging is the version of the k8s.io/<staging> modules
	// (k8s.io/api, k8s.io/client-go, ...) matching Kubernetes.
	KubernetesStaging string
	// Etcd is the go.etcd.io/etcd/server/v3, etcdctl/v3 and etcdutl/v3
	// version. kubeadm pairs Kubernetes 1.34 and later with etcd 3.6.
	Etcd string
	// CoreDNS is the github.com/coredns/coredns module version.
	CoreDNS string
}

// releases is the immutable release table, newest first: the first is the
// default.
var releases = [...]Release{
	{Kubernetes: "v1.36.3", KubernetesStaging: "v0.36.3", Etcd: "v3.6.16", CoreDNS: "v1.15.0"},
	{Kubernetes: "v1.36.1", KubernetesStaging: "v0.36.1", Etcd: "v3.6.16", CoreDNS: "v1.15.0"},
	{Kubernetes: "v1.35.4", KubernetesStaging: "v0.35.4", Etcd: "v3.5.35", CoreDNS: "v1.15.0"},
}

// Releases returns every release kiln installs, newest first.
func Releases() []Release {
	return append([]Release(nil), releases[:]...)
}

// Default returns the newest release, the one a cluster gets when its
// install-config names none.
func Default() Release { return releases[0] }

// Versions returns the Kubernetes versions of Releases, newest first.
func Versions() []string {
	var vs []string
	for _, r := range releases {
		vs = append(vs, r.Kubernetes)
	}
	return vs
}

// Lookup returns the release of Kubernetes version v ("v1.35.4"; the "v" may
// be left out); the error names the versions there are.
func Lookup(v string) (Release, error) {
	want := "v" + strings.TrimPrefix(v, "v")
	for _, r := range releases {
		if r.Kubernetes == want {
			return r, nil
		}
	}
	return Release{}, fmt.Errorf("kiln installs Kubernetes %s, not %q", strings.Join(Versions(), ", "), v)
}

// Minor returns the Kubernetes minor version: 36 for v1.36.3.
func (r Release) Minor() int {
	v, err := ParseVersion(r.Kubernetes)
	if err != nil {
		return 0
	}
	return v.Minor
}

// Images returns every image kiln builds for r, in a fixed order. The result
// is a fresh slice that the caller may modify.
func (r Release) Images() []ImageSpec {
	return []ImageSpec{
		{Component: Pause, Tag: PauseVersion, Binaries: []string{"pause"}},
		{Component: Etcd, Tag: r.Etcd, Binaries: []string{"etcd", "etcdctl", "etcdutl"}},
		{Component: KubeAPIServer, Tag: r.Kubernetes, Binaries: []string{"kube-apiserver"}},
		{Component: KubeControllerManager, Tag: r.Kubernetes, Binaries: []string{"kube-controller-manager"}},
		{Component: KubeScheduler, Tag: r.Kubernetes, Binaries: []string{"kube-scheduler"}},
		{Component: KubeProxy, Tag: r.Kubernetes, Binaries: []string{"kube-proxy"}},
		{Component: CoreDNS, Tag: r.CoreDNS, Binaries: []string{"coredns"}},
		{Component: LocalPathProvisioner, Tag: LocalPathProvisionerVersion, Binaries: []string{"local-path-provisioner", "local-path-helper"}},
		{Component: MetricsServer, Tag: MetricsServerVersion, Binaries: []string{"metrics-server"}},
		{Component: KubeRouter, Tag: KubeRouterVersion, Binaries: []string{"kube-router"}},
		{Component: MetalLB, Tag: MetalLBVersion, Binaries: []string{"metallb", "metallb-speaker"}},
	}
}

// Components returns the component of every image of r, in the order of
// Images: what a node of r has loaded.
func (r Release) Components() []Component {
	var cs []Component
	for _, s := range r.Images() {
		cs = append(cs, s.Component)
	}
	return cs
}

// Spec returns the image description of c in r.
func (r Release) Spec(c Component) ImageSpec {
	for _, s := range r.Images() {
		if s.Component == c {
			return s
		}
	}
	panic(fmt.Sprintf("release: unknown component %q", string(c)))
}

// Image returns the image reference of c in r, e.g.
// Default().Image(KubeAPIServer) == "kiln.local/kube-apiserver:v1.36.3".
func (r Release) Image(c Component) string {
	return r.Spec(c).Ref()
}

// WithImage returns the newest pinned release whose c is the image ref
// ("kiln.local/etcd:v3.6.16"); the error says that none is.
func WithImage(c Component, ref string) (Release, error) {
	for _, r := range releases {
		if r.Image(c) == ref {
			return r, nil
		}
	}
	return Release{}, fmt.Errorf("no release kiln pins runs %s", ref)
}

// Retag points every image of c in manifest (a static pod's YAML) at ref;
// it is an error when manifest names no image of c.
func Retag(manifest []byte, c Component, ref string) ([]byte, error) {
	re := regexp.MustCompile(`(` + regexp.QuoteMeta(Registry+"/"+string(c)) + `):[A-Za-z0-9_.+-]+`)
	if !re.Match(manifest) {
		return nil, fmt.Errorf("no image %s/%s in it", Registry, c)
	}
	return re.ReplaceAllLiteral(manifest, []byte(ref)), nil
}

// EtcdSnapshotCount is the --snapshot-count of kiln's etcd members: a raft
// snapshot every 100 applied entries (etcd 3.6's default is 10,000; a
// small cluster applies a few entries a second). etcd 3.6 restarted after
// its cluster version moved from 3.5 replays the write-ahead log from its
// last snapshot, and a member removal it meets there fails validation
// against the v3 store ("membership: ID removed") without leaving raft's
// voters: the removed member votes again, and a single master, or a
// cluster of three with one down, has no quorum (etcd-io/etcd#20967;
// found by TestSSHClusterUpgrade and reproduced on local: a 1 + 1 cluster
// upgraded from v1.35.4, its etcd killed once, never came back). With a
// snapshot soon after every start, no restart replays the bootstrap
// member's removal.
const EtcdSnapshotCount = 100

// etcdSnapshotFlag is the flag in a manifest; etcdDataDirFlag the line it
// follows in one written before it.
var (
	etcdSnapshotFlag = regexp.MustCompile(`(?m)^(\s*- --snapshot-count=)[0-9]+$`)
	etcdDataDirFlag  = regexp.MustCompile(`(?m)^(\s*)- --data-dir=.*$`)
)

// WithEtcdSnapshotCount returns an etcd static pod manifest whose
// --snapshot-count is EtcdSnapshotCount: the flag's value replaced (an
// earlier kiln wrote 10000), or the flag added after --data-dir; an error
// when it has neither.
func WithEtcdSnapshotCount(manifest []byte) ([]byte, error) {
	if etcdSnapshotFlag.Match(manifest) {
		return etcdSnapshotFlag.ReplaceAll(manifest, []byte("${1}"+strconv.Itoa(EtcdSnapshotCount))), nil
	}
	loc := etcdDataDirFlag.FindSubmatchIndex(manifest)
	if loc == nil {
		return nil, errors.New("no --data-dir flag in the etcd manifest")
	}
	indent := string(manifest[loc[2]:loc[3]])
	out := append([]byte{}, manifest[:loc[1]]...)
	out = append(out, "\n"+indent+"- --snapshot-count="+strconv.Itoa(EtcdSnapshotCount)...)
	return append(out, manifest[loc[1]:]...), nil
}

// PauseImage returns the pause image's reference, the same in every
// release: the pod sandbox image, and the image kiln's own helper pods run
// its binary in.
func PauseImage() string {
	return ImageSpec{Component: Pause, Tag: PauseVersion}.Ref()
}

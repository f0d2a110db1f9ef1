package types

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// APIVersion is the only install-config apiVersion kiln accepts.
const APIVersion = "kiln.dev/v1"

// The pod networks of networking.networkType (docs/pod-network.md).
const (
	// NetworkTypeKilnBridge routes each node's pod block to the node's
	// address: the machines share one L2 segment.
	NetworkTypeKilnBridge = "KilnBridge"
	// NetworkTypeKilnVXLAN carries pod traffic between the nodes in a
	// VXLAN overlay: the machines only need to reach each other by IP.
	NetworkTypeKilnVXLAN = "KilnVXLAN"
)

// NetworkTypes are the accepted values of networking.networkType.
func NetworkTypes() []string { return []string{NetworkTypeKilnBridge, NetworkTypeKilnVXLAN} }

// The values of networking.egress: what pods and machines reach outside
// the cluster (docs/pod-network.md, "Egress").
const (
	// EgressNAT lets pods and machines reach what their host reaches:
	// pod traffic to addresses outside the cluster and service networks
	// is masqueraded on its node, and on the local platform the host
	// masquerades the machine network out of its other interfaces.
	EgressNAT = "NAT"
	// EgressNone seals the cluster: nothing is masqueraded or forwarded
	// out of it, for air-gapped sites and tests that must send nothing
	// outside.
	EgressNone = "None"
)

// Egresses are the accepted values of networking.egress.
func Egresses() []string { return []string{EgressNAT, EgressNone} }

// The values of controlPlaneHardwareSpeed (OpenShift's names for the same
// choice).
const (
	// HardwareSpeedStandard keeps etcd's own timing: a heartbeat every
	// 100 ms, a new leader elected after 1 s without one.
	HardwareSpeedStandard = "Standard"
	// HardwareSpeedSlower is for control-plane machines that are slow or
	// share a loaded host (an emulated VM, small boards): etcd heartbeats
	// every 500 ms and elects after 5 s, the API servers allow their etcd
	// health checks 10 s instead of 2, and the control plane's containers
	// 20 min to start instead of 5.
	HardwareSpeedSlower = "Slower"
)

// HardwareSpeeds are the accepted values of controlPlaneHardwareSpeed.
func HardwareSpeeds() []string { return []string{HardwareSpeedStandard, HardwareSpeedSlower} }

// Config is the content of install-config.yaml.
type Config struct {
	// APIVersion is the schema version, kiln.dev/v1.
	APIVersion string `json:"apiVersion"`
	// Metadata names the cluster.
	Metadata Metadata `json:"metadata"`
	// BaseDomain is the DNS domain the cluster's names live under:
	// api.<metadata.name>.<baseDomain>.
	BaseDomain string `json:"baseDomain"`
	// KubernetesVersion is the Kubernetes release the cluster runs, one of
	// those kiln pins (`kiln version` lists them, each with its etcd and
	// CoreDNS); default the newest. The local platform builds or reuses the
	// node image of that release.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ControlPlane is the pool of control-plane (master) machines.
	ControlPlane *MachinePool `json:"controlPlane,omitempty"`
	// ControlPlaneHardwareSpeed tunes etcd and the API servers' etcd checks
	// for the control plane's machines: Standard (default) or Slower, for
	// slow or loaded hosts, where etcd's default timing elects a new leader
	// again and again and nothing gets written. Slower also holds the
	// workers back until the bootstrap machine is gone, keeps the add-ons
	// off the masters when there are workers, retires the bootstrap
	// machine's control plane and etcd member as soon as the masters' members
	// vote, and gives the masters' controllers 60 s leader leases.
	ControlPlaneHardwareSpeed string `json:"controlPlaneHardwareSpeed,omitempty"`
	// Compute lists the pools of worker machines.
	Compute []MachinePool `json:"compute,omitempty"`
	// Networking is the cluster's address plan.
	Networking *Networking `json:"networking,omitempty"`
	// Platform selects and configures exactly one platform.
	Platform Platform `json:"platform"`
	// SSHKey is an authorized_keys line installed for the core user.
	SSHKey string `json:"sshKey,omitempty"`
	// PullSecret is an optional JSON registry credential document.
	PullSecret string `json:"pullSecret,omitempty"`
	// AdditionalTrustBundle is PEM CA certificates the nodes also trust.
	AdditionalTrustBundle string `json:"additionalTrustBundle,omitempty"`
	// Proxy configures an egress HTTP proxy for the nodes' containerd, with the cluster's names
	// and networks added to noProxy; kiln's own downloads (a node image's Go modules and Debian
	// packages) use it too where kiln's environment names no proxy.
	Proxy *Proxy `json:"proxy,omitempty"`
	// ImageMirrors are registries whose images the nodes pull from mirrors first (OpenShift's
	// imageDigestSources, by registry): each node's containerd tries the cluster's own registry
	// (the registry add-on) where it mirrors the source, then these mirrors in order, then the
	// source itself.
	ImageMirrors []ImageMirror `json:"imageMirrors,omitempty"`
	// Timeouts bounds each wait of create cluster.
	Timeouts *Timeouts `json:"timeouts,omitempty"`
	// PKI sets the lifetime of the certificates kiln issues (docs/pki.md).
	PKI *PKI `json:"pki,omitempty"`
	// Backup schedules etcd backups in the cluster, on the masters (docs/backup.md).
	Backup *Backup `json:"backup,omitempty"`
}

// Backup schedules etcd backups that the cluster takes by itself.
type Backup struct {
	// Schedule is when the cluster takes a backup, in cron's five fields (minute hour day-of-month month day-of-week, UTC), as a Kubernetes CronJob reads it: "0 3 * * *" is every day at 03:00. Each run takes an etcd snapshot on a master and archives it, integrity-checked, under /var/lib/kiln/backups on that master.
	Schedule string `json:"schedule"`
	// Keep is how many archives each master keeps; older ones are removed after each new one (default 7, at most 100).
	Keep int `json:"keep,omitempty"`
	// EncryptTo are age public keys ("age1..."; `kiln backup keygen` makes a pair) the archives are encrypted to; none leaves them unencrypted (0600, root's). The cluster holds no key that decrypts them.
	EncryptTo []string `json:"encryptTo,omitempty"`
}

// ImageMirror is one registry and its mirrors.
type ImageMirror struct {
	// Source is the registry as image names give it, e.g. docker.io, quay.io or
	// registry.example.com:5000.
	Source string `json:"source"`
	// Mirrors are tried in order before the source, over HTTPS (trusting
	// additionalTrustBundle too): a registry host with an optional port and path prefix, e.g.
	// mirror.example.com/dockerhub (then docker.io/library/nginx is pulled as
	// mirror.example.com/dockerhub/library/nginx).
	Mirrors []string `json:"mirrors"`
}

// Metadata names the cluster.
type Metadata struct {
	// Name is the cluster name: a DNS-1123 label of at most 27 characters, so the
	// infra ID (<name>-<5 random characters>) keeps all of it.
	Name string `json:"name"`
}

// MachinePool is a set of identical machines.
type MachinePool struct {
	// Name is the pool name: "master" for the control plane, "worker" for compute.
	Name string `json:"name"`
	// Replicas is the number of machines. The control plane takes 1, 3 or 5 (an odd
	// number of etcd members; default 3); a compute pool 0 or more (default 1).
	Replicas *int64 `json:"replicas,omitempty"`
	// Platform holds per-platform machine settings.
	Platform MachinePoolPlatform `json:"platform,omitempty"`
}

// MachinePoolPlatform holds the machine settings of the selected platform.
type MachinePoolPlatform struct {
	// Local configures machines of the local platform.
	Local *local.MachinePool `json:"local,omitempty"`
}

// Networking is the cluster's address plan.
type Networking struct {
	// NetworkType names the pod network implementation, KilnBridge or KilnVXLAN. Both
	// put a CNI bridge on each node. KilnBridge (the default) routes each node's pod
	// block to the node's address, for machines on one L2 segment; KilnVXLAN sends
	// pod traffic between nodes through a VXLAN overlay (UDP port 4789, pod MTU 50
	// bytes below the machines'), for machines that only reach each other by IP.
	NetworkType string `json:"networkType,omitempty"`
	// ClusterNetwork are the pod address blocks; each node gets a /hostPrefix out of one
	// (default 10.128.0.0/14 with hostPrefix 23).
	ClusterNetwork []ClusterNetworkEntry `json:"clusterNetwork,omitempty"`
	// ServiceNetwork is the Service ClusterIP block: exactly one, between a /12 and a /24
	// (default 172.30.0.0/16). Its first address is the kubernetes Service, its tenth
	// the cluster DNS.
	ServiceNetwork []string `json:"serviceNetwork,omitempty"`
	// MachineNetwork are the blocks the machines' addresses come from; the platform
	// chooses the default (local: 10.66.0.0/24; otherwise 10.0.0.0/16).
	MachineNetwork []MachineNetworkEntry `json:"machineNetwork,omitempty"`
	// Egress is what pods and machines reach outside the cluster: NAT (the default)
	// masquerades pod traffic to addresses outside the cluster and service networks on
	// its node, and on the local platform gives machines a route out through the host,
	// which masquerades them as Docker does for kind; None seals the cluster (nothing
	// leaves it), for air-gapped sites.
	Egress string `json:"egress,omitempty"`
}

// ClusterNetworkEntry is one pod address block.
type ClusterNetworkEntry struct {
	// CIDR is the block, e.g. 10.128.0.0/14.
	CIDR string `json:"cidr"`
	// HostPrefix is the prefix length of each node's share, e.g. 23; at most 25, so a
	// node holds kubelet's 110 pods.
	HostPrefix int32 `json:"hostPrefix"`
}

// MachineNetworkEntry is one machine address block.
type MachineNetworkEntry struct {
	// CIDR is the block, e.g. 10.0.0.0/16.
	CIDR string `json:"cidr"`
}

// Platform holds exactly one platform's configuration.
type Platform struct {
	// Local is the embedded platform: systemd-nspawn machines on a host bridge.
	Local *local.Platform `json:"local,omitempty"`
	// None is user-provisioned infrastructure: kiln writes Ignition configs only.
	None *none.Platform `json:"none,omitempty"`
	// SSH installs onto Linux hosts the user has, reached over SSH.
	SSH *ssh.Platform `json:"ssh,omitempty"`
}

// Proxy configures an egress HTTP proxy.
type Proxy struct {
	// HTTPProxy is the URL of the proxy for http:// destinations.
	HTTPProxy string `json:"httpProxy,omitempty"`
	// HTTPSProxy is the URL of the proxy for https:// destinations.
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	// NoProxy is a comma-separated list of destinations that bypass the proxy.
	NoProxy string `json:"noProxy,omitempty"`
}

// PKI sets the lifetime of the certificates kiln issues.
type PKI struct {
	// LeafValidity is the lifetime of the serving and client certificates kiln issues (the API server's, the etcd members', the control plane's clients', the machine-config server's, the kubeconfigs' in auth/), a Go duration: at least 168h (7 days) and at most 8760h (1 year, the default). `kiln certs renew` issues them again. The kubelets' certificates are not kiln's: kube-controller-manager issues them for 1 year and the kubelets renew them.
	LeafValidity string `json:"leafValidity,omitempty"`
	// AllowShortLeafValidityForTests lets leafValidity be as short as 2m, for tests that watch certificates expire; such a cluster's API stops when they do, until `kiln certs renew`.
	AllowShortLeafValidityForTests bool `json:"allowShortLeafValidityForTests,omitempty"`
	// Renewal is who renews the leaf certificates on the masters: Automatic (the default) runs a timer on every master that issues a certificate again, for its key, names and lifetime, once less than renewBefore of it is left, one master at a time (an etcd lock), restarting only what reads it; the masters then hold the etcd and front-proxy CA keys as well (docs/security.md). Manual leaves those keys off the masters: run `kiln certs renew` before the certificates expire.
	Renewal string `json:"renewal,omitempty"`
	// RenewBefore is how long before a leaf certificate expires the masters renew it (Renewal Automatic), a Go duration: at least 1h and at most half of leafValidity; the default is 720h (30 days), or a third of leafValidity when that is shorter. With allowShortLeafValidityForTests it may be as short as 1m and up to just under leafValidity.
	RenewBefore string `json:"renewBefore,omitempty"`
}

// The values of pki.renewal.
const (
	// RenewalAutomatic renews the masters' leaf certificates on the masters.
	RenewalAutomatic = "Automatic"
	// RenewalManual leaves renewal to `kiln certs renew`.
	RenewalManual = "Manual"
)

// Timeouts bounds the waits of create cluster; values are Go durations ("20m").
type Timeouts struct {
	// Bootstrap bounds the wait for bootstrap-complete (default 30m).
	Bootstrap string `json:"bootstrap,omitempty"`
	// Install bounds the wait for install-complete (default 30m).
	Install string `json:"install,omitempty"`
	// API bounds the wait for the Kubernetes API to answer (default 20m).
	API string `json:"api,omitempty"`
}

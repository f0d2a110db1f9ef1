package ssh

// Name is the key of the ssh platform's section in install-config.yaml.
const Name = "ssh"

// The roles of a host.
const (
	// RoleBootstrap is the temporary bootstrap host: it runs the first
	// control plane and serves the masters' configs, and is reset once the
	// masters have taken over.
	RoleBootstrap = "bootstrap"
	// RoleMaster is a control-plane host: etcd and the API server.
	RoleMaster = "master"
	// RoleWorker is a compute host.
	RoleWorker = "worker"
)

// Roles are the accepted values of hosts[].role.
func Roles() []string { return []string{RoleBootstrap, RoleMaster, RoleWorker} }

// Ports of the proxy every host runs on its loopback interface: the
// cluster's own components reach the API and the machine-config server
// through it, so that they need no DNS and no load balancer, and survive
// the loss of any master (docs/platform-ssh.md).
const (
	// APIProxyPort forwards to port 6443 of the bootstrap host and the
	// masters (a master's own API server holds 6443).
	APIProxyPort = 6444
	// MachineConfigProxyPort forwards to port 22623 of the same hosts.
	MachineConfigProxyPort = 22624
)

// DefaultUser logs in when platform.ssh.user is unset.
const DefaultUser = "root"

// DefaultPort is the hosts' SSH port when platform.ssh.port is unset.
const DefaultPort = 22

// Platform configures the ssh platform: how kiln reaches the hosts, and
// the hosts.
type Platform struct {
	// User logs in on every host (default root); another user must run sudo without a
	// password, through which kiln runs its scripts as root.
	User string `json:"user,omitempty"`
	// Port is the hosts' SSH port (default 22).
	Port int32 `json:"port,omitempty"`
	// IdentityFile is the private key kiln logs in with, an absolute path; unset, kiln asks the
	// SSH agent at $SSH_AUTH_SOCK. An encrypted key must be loaded into the agent instead.
	IdentityFile string `json:"identityFile,omitempty"`
	// KnownHostsFile holds the hosts' (and the bastion's) public keys, an absolute path
	// (default ~/.ssh/known_hosts of the user running kiln); a host whose key is not there is
	// refused, never trusted on first use.
	KnownHostsFile string `json:"knownHostsFile,omitempty"`
	// Bastion is host[:port] of a jump host kiln dials the hosts through, with the same user
	// and key; unset, kiln dials them directly.
	Bastion string `json:"bastion,omitempty"`
	// APIVIP is the address users reach the API at from outside the hosts. A free IPv4
	// address in networking.machineNetwork is a virtual IP that kiln keeps: MetalLB (built
	// from source) announces it by ARP from one master whose API server is ready, and from
	// another within seconds when that master or its API server stops. Otherwise it is one
	// master's address, or (with apiVIPManaged: false) your own load balancer or VIP in front
	// of port 6443 of the masters. It is in the API server's certificate and the admin
	// kubeconfig. Unset, the admin kubeconfig names api.<metadata.name>.<baseDomain>, which
	// the user's DNS resolves to the masters. The hosts themselves never use it: each reaches
	// the API through its own proxy on 127.0.0.1:6444.
	APIVIP string `json:"apiVIP,omitempty"`
	// APIVIPManaged says whether kiln announces apiVIP (default true when apiVIP is an IPv4
	// address that no host has). Set it to false when apiVIP belongs to a load balancer or
	// VIP of yours; true with apiVIP unset, a DNS name or a host's address is refused.
	APIVIPManaged *bool `json:"apiVIPManaged,omitempty"`
	// LoadBalancerIPs are the addresses LoadBalancer Services (without a loadBalancerClass)
	// get, each a range "first-last" or a CIDR, on the hosts' segment: in
	// networking.machineNetwork, and no host's address or apiVIP among them. MetalLB (built
	// from source) assigns them and announces each from one node by ARP, and from another
	// node within seconds when that node goes. Unset, no LoadBalancer add-on runs and such
	// Services stay pending.
	LoadBalancerIPs []string `json:"loadBalancerIPs,omitempty"`
	// NTPServers are the time servers (IPv4 addresses or DNS names) every host keeps its
	// clock in step with. Unset, the hosts' own time configuration is left alone. Set, kiln
	// configures the NTP client each host has installed (chrony, through
	// /etc/chrony/sources.d, or else systemd-timesyncd, through a drop-in), enables and
	// restarts it, and installs a host only once its clock is synchronised; the host's reset
	// gives its time configuration back as it was.
	NTPServers []string `json:"ntpServers,omitempty"`
	// Hosts are the cluster's machines: one bootstrap host, the masters (as many as
	// controlPlane.replicas) and the workers (as many as the compute pools' replicas, the
	// bootstrap host among them when it joins as a worker).
	Hosts []Host `json:"hosts"`
	// Addons switches off the add-ons an ssh cluster gets by default, for users who bring
	// their own.
	Addons *Addons `json:"addons,omitempty"`
}

// Addons selects the in-cluster add-ons of an ssh cluster; each is installed unless set to
// false. They are local's storage and metrics add-ons; local's registry runs on kiln's host,
// which an ssh cluster does not have, and its LoadBalancer is MetalLB, on when loadBalancerIPs
// is set.
type Addons struct {
	// Storage is the default StorageClass "standard": rancher's local-path-provisioner, with
	// volumes in /var/lib/kiln/local-path on the host whose node runs the pod, removed with the
	// rest of kiln's files when the host is reset (default true).
	Storage *bool `json:"storage,omitempty"`
	// Metrics is metrics-server: the metrics.k8s.io API behind `kubectl top` and
	// HorizontalPodAutoscalers (default true).
	Metrics *bool `json:"metrics,omitempty"`
}

// Host is one of the user's machines.
type Host struct {
	// Name is the host's hostname, which its Node is named after; kiln checks that the host
	// answers to it and leaves it unchanged.
	Name string `json:"name"`
	// Address is the host's IPv4 address in machineNetwork: where kiln reaches its SSH
	// server, and the address its node and the other hosts use.
	Address string `json:"address"`
	// Role is bootstrap, master or worker.
	Role string `json:"role"`
	// JoinAsWorker has the bootstrap host (set on no other) join the cluster as a worker once
	// the install no longer needs it: after bootstrap-complete the host is reset, then
	// installed as a worker named after it, counted in the compute pools' replicas. kiln scale
	// cluster --config may set or clear it on a running cluster.
	JoinAsWorker bool `json:"joinAsWorker,omitempty"`
}

// Worker reports whether h is, or becomes after the install, a worker:
// role worker, or the bootstrap host with JoinAsWorker.
func (h Host) Worker() bool {
	return h.Role == RoleWorker || h.Role == RoleBootstrap && h.JoinAsWorker
}

package local

// Name is the key of the local platform's section in install-config.yaml.
const Name = "local"

// Platform configures the local platform.
type Platform struct {
	// BridgeName is the host bridge; defaults to "kiln-" + the infra ID's random suffix (the part
	// after its last "-", at most 10 characters), so it fits the 15 characters of an interface name.
	BridgeName string `json:"bridgeName,omitempty"`
	// APIVIP is the host address the API load balancer listens on; defaults to the
	// first address of machineNetwork[0].
	APIVIP string `json:"apiVIP,omitempty"`
	// NodeImage is a node image directory or tarball; defaults to the one kiln builds into its cache.
	NodeImage string `json:"nodeImage,omitempty"`
	// DefaultMachinePlatform applies to pools that set no local section.
	DefaultMachinePlatform *MachinePool `json:"defaultMachinePlatform,omitempty"`
	// Addons switches off the add-ons a local cluster gets by default, for users who bring
	// their own.
	Addons *Addons `json:"addons,omitempty"`
	// RegistryPort is the port of the registry add-on, on the host's loopback (localhost:<port>,
	// where the host pushes) and on the host bridge (where the nodes pull); defaults to the first
	// port nothing on the host listens on from 5001 plus the third byte of the machine network
	// (5001 for 10.66.0.0/24, 5102 for 10.66.101.0/24), so clusters on different networks differ.
	RegistryPort int32 `json:"registryPort,omitempty"`
}

// Addons selects the add-ons of a local cluster; each is installed unless set to false.
type Addons struct {
	// Storage is the default StorageClass "standard": rancher's local-path-provisioner, with
	// volumes in /var/lib/kiln/local-path on the node that runs the pod (default true).
	Storage *bool `json:"storage,omitempty"`
	// Metrics is metrics-server: the metrics.k8s.io API behind `kubectl top` and
	// HorizontalPodAutoscalers (default true).
	Metrics *bool `json:"metrics,omitempty"`
	// LoadBalancer gives each LoadBalancer Service an address on the host bridge, from the
	// last quarter of machineNetwork[0], proxied to its node ports by `kiln service-lb` on
	// the host (default true).
	LoadBalancer *bool `json:"loadBalancer,omitempty"`
	// Registry is an image registry on the host for the cluster (the distribution registry, plain
	// HTTP, no login): push to localhost:<registryPort> from the host and pods pull the same names;
	// the nodes also look up kiln.local, registry.k8s.io and docker.io images there first, so an
	// imagePullPolicy Always pod of an image pushed there runs offline (default true).
	Registry *bool `json:"registry,omitempty"`
}

// MachinePool sizes a local (systemd-nspawn) machine.
type MachinePool struct {
	// CPUs is the CPU quota in cores, e.g. 1.5; enforced where the host's cgroups allow it.
	CPUs float64 `json:"cpus,omitempty"`
	// MemoryMiB is the memory limit in MiB, 0 (no limit) or at least 1024; enforced
	// where the host's cgroups allow it.
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

package terraform

// LocalVars are the variables of the local platform's stages (local/variables.tf),
// written by kiln as each stage's kiln.tfvars.json. Every stage declares all
// of them, so one value serves every stage.
type LocalVars struct {
	// ClusterName is metadata.name of the install-config.
	ClusterName string `json:"cluster_name"`
	// BaseDomain is baseDomain of the install-config.
	BaseDomain string `json:"base_domain"`
	// InfraID prefixes every machine name.
	InfraID string `json:"infra_id"`
	// Bridge is the host bridge's name.
	Bridge string `json:"bridge"`
	// MachineCIDR is the machine network, e.g. "10.66.0.0/24".
	MachineCIDR string `json:"machine_cidr"`
	// ServiceNetwork is the cluster's service network (networking.serviceNetwork),
	// routed on-link in every machine so that host-network clients of a
	// ClusterIP (kube-apiserver calling a webhook) have a route to it.
	ServiceNetwork []string `json:"service_network"`
	// APIVIP is the host's address on the bridge, where the load balancer listens.
	APIVIP string `json:"api_vip"`
	// NodeImage is the node image rootfs directory.
	NodeImage string `json:"node_image"`
	// MachineImages is the node image rootfs directory of each machine
	// that boots another release than NodeImage's (one kiln scale added to
	// an upgraded cluster), by machine name. An entry never changes once
	// its machine exists: the machine would be replaced.
	MachineImages map[string]string `json:"machine_images,omitempty"`
	// KilnBinary is bound read-only at /usr/local/bin/kiln in every machine.
	KilnBinary string `json:"kiln_binary"`
	// MachineDir is the machines' state root; the provider's default when nil.
	MachineDir *string `json:"machine_dir"`
	// LBDir holds the load balancer's files; the provider's default when nil.
	LBDir *string `json:"lb_dir"`
	// BootstrapIgnition is bootstrap.ign (secret).
	BootstrapIgnition string `json:"bootstrap_ignition"`
	// MasterIgnition is master.ign.
	MasterIgnition string `json:"master_ignition"`
	// WorkerIgnition is worker.ign.
	WorkerIgnition string `json:"worker_ignition"`
	// BootstrapAddress is the bootstrap machine's address, without prefix.
	BootstrapAddress string `json:"bootstrap_address"`
	// BootstrapInLB keeps the bootstrap machine in the load balancer pools;
	// set false and re-apply the network stage before destroying it.
	BootstrapInLB bool `json:"bootstrap_in_lb"`
	// MasterNames are the masters' machine names; kiln before day-2
	// support wrote master_count instead, which Normalize turns into names.
	MasterNames []string `json:"master_names"`
	// MasterAddresses are the masters' addresses, without prefix, in the
	// order of MasterNames.
	MasterAddresses []string `json:"master_addresses"`
	// WorkerNames are the workers' machine names.
	WorkerNames []string `json:"worker_names"`
	// WorkerAddresses are the workers' addresses, without prefix, in the
	// order of WorkerNames.
	WorkerAddresses []string `json:"worker_addresses"`
	// BootstrapCPUs is the bootstrap machine's CPU quota in cores; 0 is unlimited.
	BootstrapCPUs float64 `json:"bootstrap_cpus"`
	// BootstrapMemoryMiB is its memory limit; 0 is unlimited.
	BootstrapMemoryMiB int64 `json:"bootstrap_memory_mib"`
	// MasterCPUs is each master's CPU quota in cores; 0 is unlimited.
	MasterCPUs float64 `json:"master_cpus"`
	// MasterMemoryMiB is each master's memory limit; 0 is unlimited.
	MasterMemoryMiB int64 `json:"master_memory_mib"`
	// WorkerCPUs is each worker's CPU quota in cores; 0 is unlimited.
	WorkerCPUs float64 `json:"worker_cpus"`
	// WorkerMemoryMiB is each worker's memory limit; 0 is unlimited.
	WorkerMemoryMiB int64 `json:"worker_memory_mib"`
	// MachineStates is the desired state of the stage's machines, by
	// machine name: the word of platforms.MachineRunning or MachineStopped
	// ("running", "stopped"), as the provisioner writes it from the typed
	// state and the modules and the provider check it. A machine it does
	// not name runs (variables written before it existed).
	MachineStates map[string]string `json:"machine_states,omitempty"`
	// DaemonState is the desired state of the stage's daemon, a word like
	// those of MachineStates: the API load balancer (network stage), the
	// LoadBalancer Service controller (cluster stage). Empty (variables
	// written before it existed) is running.
	DaemonState string `json:"daemon_state,omitempty"`
	// ServiceLBPool is the address range of LoadBalancer Services; nil when
	// the loadBalancer add-on is off, and then the cluster stage has no
	// LoadBalancer Service controller.
	ServiceLBPool *AddressRange `json:"service_lb_pool"`
	// ServiceLBKubeconfig is the admin kubeconfig the LoadBalancer Service
	// controller watches the API with (secret); "" when the add-on is off.
	ServiceLBKubeconfig string `json:"service_lb_kubeconfig"`
	// Registry is the network stage's image registry (the registry add-on);
	// nil when the add-on is off, and then the stage has none.
	Registry *Registry `json:"registry"`
	// EgressNAT is networking.egress NAT: the host masquerades the machine
	// network and every machine routes through the API VIP, the host's
	// address on the bridge. False (and in variables written before it
	// existed) seals the cluster.
	EgressNAT bool `json:"egress_nat"`
}

// WithStates returns v with the named machines in state; MachineStates is
// a copy, so v's own map is left as it was.
func (v LocalVars) WithStates(state string, names ...string) LocalVars {
	states := make(map[string]string, len(v.MachineStates)+len(names))
	for n, s := range v.MachineStates {
		states[n] = s
	}
	for _, n := range names {
		states[n] = state
	}
	v.MachineStates = states
	return v
}

// Registry is the image registry of the registry add-on.
type Registry struct {
	// Port is its port, on the API VIP (pulls) and on 127.0.0.1 (pushes).
	Port int `json:"port"`
	// Binary is the host path of kiln's build of the registry.
	Binary string `json:"binary"`
}

// AddressRange is a range of IPv4 addresses, both ends included.
type AddressRange struct {
	// First is the lowest address.
	First string `json:"first"`
	// Last is the highest address.
	Last string `json:"last"`
}

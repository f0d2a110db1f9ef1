package terraform

// SSHVars are the variables of the ssh platform's stages (ssh/variables.tf),
// written as each stage's kiln.tfvars.json. Every stage declares all of
// them, so one value serves every stage.
type SSHVars struct {
	// SSHUser logs in on every host.
	SSHUser string `json:"ssh_user"`
	// SSHIdentityFile is the private key; the agent when nil.
	SSHIdentityFile *string `json:"ssh_identity_file"`
	// SSHKnownHostsFile holds the hosts' keys.
	SSHKnownHostsFile string `json:"ssh_known_hosts_file"`
	// SSHPort is the hosts' SSH port; 22 when nil.
	SSHPort *int `json:"ssh_port"`
	// SSHBastion is host[:port] of a jump host; none when nil.
	SSHBastion *string `json:"ssh_bastion"`
	// NTPServers are the time servers every host's NTP client is given
	// at its install (platform.ssh.ntpServers); none when nil.
	NTPServers []string `json:"ntp_servers"`
	// Payload is the node payload's directory on the machine running kiln.
	Payload string `json:"payload"`
	// APIProxy is the configuration of each host's proxy to the API and
	// the machine-config servers (kiln lb's JSON); none when nil.
	APIProxy *string `json:"api_proxy"`
	// Bootstrap is the bootstrap host; nil once it is reset.
	Bootstrap *SSHHost `json:"bootstrap"`
	// Masters and Workers are the cluster's other hosts.
	Masters []SSHHost `json:"masters"`
	Workers []SSHHost `json:"workers"`
	// BootstrapIgnition is bootstrap.ign (secret).
	BootstrapIgnition string `json:"bootstrap_ignition"`
	// MasterIgnition is master.ign.
	MasterIgnition string `json:"master_ignition"`
	// WorkerIgnition is worker.ign.
	WorkerIgnition string `json:"worker_ignition"`
}

// SSHHost is one host of the ssh platform.
type SSHHost struct {
	// Name is the host's name (its node's name is its hostname).
	Name string `json:"name"`
	// Address is where it answers SSH.
	Address string `json:"address"`
	// IP is its node IP (KILN_NODE_IP).
	IP string `json:"ip"`
	// State is whether its node is to run, "running" or "stopped"
	// (platforms.DesiredStates); "" is running.
	State string `json:"state,omitempty"`
	// Payload is the node payload the host is installed with when it is
	// not SSHVars.Payload (the system extension of another release: a
	// host kiln scale added to an upgraded cluster). It never changes
	// once the host is installed: the host would be reinstalled.
	Payload string `json:"payload,omitempty"`
}

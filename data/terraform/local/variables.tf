# Variables of every stage of the local platform. kiln copies this file into
# each stage and writes their values to kiln.tfvars.json (the Go type is
# data/terraform.LocalVars; a test keeps both in step).

variable "cluster_name" {
  type        = string
  description = "metadata.name of the install-config."
}

variable "base_domain" {
  type        = string
  description = "baseDomain of the install-config."
}

variable "infra_id" {
  type        = string
  description = "Cluster name plus a random suffix; prefixes every machine name."
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", var.infra_id))
    error_message = "infra_id must be a DNS label."
  }
}

variable "bridge" {
  type        = string
  description = "Name of the host bridge."
}

variable "machine_cidr" {
  type        = string
  description = "Machine network, e.g. 10.66.0.0/24."
  validation {
    condition     = can(cidrhost(var.machine_cidr, 1))
    error_message = "machine_cidr must be an IPv4 CIDR block."
  }
}

variable "service_network" {
  type        = list(string)
  default     = []
  nullable    = false
  description = "Service network CIDRs, routed on-link in every machine (no gateway): host-network clients of a ClusterIP need a route before kube-proxy's DNAT applies."
}

variable "api_vip" {
  type        = string
  description = "Host address on the bridge: API VIP, load balancer address."
}

variable "node_image" {
  type        = string
  description = "Node image rootfs directory."
}

variable "machine_images" {
  type        = map(string)
  default     = {}
  nullable    = false
  description = "The node image rootfs directory of each machine that boots another release than node_image's (one kiln scale added after an upgrade), by machine name; the others boot node_image."
}

variable "kiln_binary" {
  type        = string
  description = "Host path of the kiln binary, bound read-only at /usr/local/bin/kiln in every machine."
}

variable "machine_dir" {
  type        = string
  default     = null
  description = "State root of machines; the provider's default when null."
}

variable "lb_dir" {
  type        = string
  default     = null
  description = "Directory of load balancer files; the provider's default when null."
}

variable "bootstrap_ignition" {
  type        = string
  sensitive   = true
  description = "bootstrap.ign."
}

variable "master_ignition" {
  type        = string
  sensitive   = true
  description = "master.ign (a pointer config)."
}

variable "worker_ignition" {
  type        = string
  sensitive   = true
  description = "worker.ign (a pointer config)."
}

variable "bootstrap_address" {
  type        = string
  description = "Address of the bootstrap machine (no prefix)."
}

variable "bootstrap_in_lb" {
  type        = bool
  default     = true
  description = "Whether the load balancer sends traffic to the bootstrap machine; false once it is to be destroyed."
}

variable "master_names" {
  type        = list(string)
  default     = []
  nullable    = false
  description = "Machine names of the masters; each master's Terraform instance is keyed by its name, so any one can be removed."
}

variable "master_addresses" {
  type        = list(string)
  default     = []
  nullable    = false
  description = "Addresses of the masters (no prefix), in the order of master_names."
}

variable "worker_names" {
  type        = list(string)
  default     = []
  nullable    = false
  description = "Machine names of the workers, keyed like the masters."
}

variable "worker_addresses" {
  type        = list(string)
  default     = []
  nullable    = false
  description = "Addresses of the workers (no prefix), in the order of worker_names."
}

variable "bootstrap_cpus" {
  type        = number
  default     = 0
  description = "CPU quota of the bootstrap machine in cores; 0 is unlimited."
}

variable "bootstrap_memory_mib" {
  type        = number
  default     = 0
  description = "Memory limit of the bootstrap machine in MiB; 0 is unlimited."
}

variable "master_cpus" {
  type        = number
  default     = 0
  description = "CPU quota of each master in cores; 0 is unlimited."
}

variable "master_memory_mib" {
  type        = number
  default     = 0
  description = "Memory limit of each master in MiB; 0 is unlimited."
}

variable "worker_cpus" {
  type        = number
  default     = 0
  description = "CPU quota of each worker in cores; 0 is unlimited."
}

variable "worker_memory_mib" {
  type        = number
  default     = 0
  description = "Memory limit of each worker in MiB; 0 is unlimited."
}

variable "machine_states" {
  type        = map(string)
  default     = {}
  nullable    = false
  description = "Desired state of the stage's machines by machine name: running or stopped (keeping its disk). A machine not named runs. kiln stop/start cluster apply the stages with it, so the state always records what the machines do."
  validation {
    condition     = alltrue([for s in values(var.machine_states) : contains(["running", "stopped"], s)])
    error_message = "machine_states values must be \"running\" or \"stopped\"."
  }
}

variable "daemon_state" {
  type        = string
  default     = "running"
  nullable    = false
  description = "Desired state of the stage's daemons: the API load balancer and the image registry (network stage), the LoadBalancer Service controller (cluster stage)."
  validation {
    condition     = contains(["running", "stopped"], var.daemon_state)
    error_message = "daemon_state must be \"running\" or \"stopped\"."
  }
}

variable "service_lb_pool" {
  type = object({
    first = string
    last  = string
  })
  default     = null
  description = "Address range of LoadBalancer Services; null when the loadBalancer add-on is off (no LoadBalancer Service controller)."
}

variable "service_lb_kubeconfig" {
  type        = string
  default     = ""
  nullable    = false
  sensitive   = true
  description = "Admin kubeconfig the LoadBalancer Service controller watches the API with."
}

variable "registry" {
  type = object({
    port   = number
    binary = string
  })
  default     = null
  description = "The image registry of the registry add-on: its port (on the API VIP for the nodes, on 127.0.0.1 for pushes) and the host path of kiln's build of the registry; null when the add-on is off (no registry)."
}

variable "egress_nat" {
  type        = bool
  default     = false
  nullable    = false
  description = "networking.egress NAT: the host masquerades the machine network out of its other interfaces and every machine's default route leads to api_vip, the host's address on the bridge; false seals the cluster."
}

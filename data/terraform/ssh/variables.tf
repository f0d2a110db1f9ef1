# Variables of every stage of the ssh platform (data/terraform.SSHVars).

variable "ssh_user" {
  type        = string
  description = "Login user on every host; another than root runs kiln's scripts through sudo -n."
}

variable "ssh_identity_file" {
  type        = string
  default     = null
  description = "Private key file; the agent at $SSH_AUTH_SOCK when null."
}

variable "ssh_known_hosts_file" {
  type        = string
  description = "The hosts' (and the bastion's) keys."
}

variable "ssh_port" {
  type        = number
  default     = null
  description = "The hosts' SSH port; 22 when null."
}

variable "ssh_bastion" {
  type        = string
  default     = null
  description = "host[:port] of a jump host; none when null."
}

variable "ntp_servers" {
  type        = list(string)
  default     = null
  description = "The time servers every host's NTP client is given at its install; the hosts' time configuration is left alone when null."
}

variable "payload" {
  type        = string
  description = "The node payload's directory on the machine running kiln."
}

variable "api_proxy" {
  type        = string
  default     = null
  description = "The configuration of each host's proxy to the API and machine-config servers (kiln lb's JSON); no proxy when null."
}

variable "bootstrap" {
  type = object({
    name    = string
    address = string
    ip      = string
    state   = optional(string, "running")
  })
  default     = null
  description = "The temporary bootstrap host: name, SSH address, node IP and whether its node runs (running or stopped); null once it is reset."
}

variable "masters" {
  type = list(object({
    name    = string
    address = string
    ip      = string
    state   = optional(string, "running")
    payload = optional(string)
  }))
  default     = []
  nullable    = false
  description = "The masters: name, SSH address, node IP, whether each node runs (running or stopped) and its node payload when not payload (another release's); none when null."
}

variable "workers" {
  type = list(object({
    name    = string
    address = string
    ip      = string
    state   = optional(string, "running")
    payload = optional(string)
  }))
  default     = []
  nullable    = false
  description = "The workers: name, SSH address, node IP, whether each node runs (running or stopped) and its node payload when not payload (another release's); none when null."
}

variable "bootstrap_ignition" {
  type        = string
  sensitive   = true
  description = "bootstrap.ign."
}

variable "master_ignition" {
  type        = string
  sensitive   = true
  description = "master.ign."
}

variable "worker_ignition" {
  type        = string
  sensitive   = true
  description = "worker.ign."
}

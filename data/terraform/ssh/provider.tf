# Provider and common values of every stage of the ssh platform: the hosts
# are the user's, reached over SSH; kilnssh_host installs one machine's
# Ignition config onto one of them and resets it on destroy.

terraform {
  required_version = ">= 1.5.0"
  required_providers {
    kilnssh = {
      source = "kiln.dev/kiln/kilnssh"
    }
  }
}

provider "kilnssh" {
  user             = var.ssh_user
  identity_file    = var.ssh_identity_file
  known_hosts_file = var.ssh_known_hosts_file
  port             = var.ssh_port
  bastion          = var.ssh_bastion
}

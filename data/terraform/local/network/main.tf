# Stage "network": the host bridge and the API load balancer on its gateway
# address. Applied first, destroyed last; re-applied with
# bootstrap_in_lb = false before the bootstrap stage is destroyed, and with
# daemon_state = "stopped" last by kiln stop cluster.

resource "kilnlocal_network" "bridge" {
  name    = var.bridge
  cidr    = var.machine_cidr
  gateway = var.api_vip
}

locals {
  control_plane = concat(var.bootstrap_in_lb ? [var.bootstrap_address] : [], var.master_addresses)
}

resource "kilnlocal_load_balancer" "api" {
  name         = var.infra_id
  listen       = kilnlocal_network.bridge.gateway
  api_backends = local.control_plane
  mcs_backends = local.control_plane
  state        = var.daemon_state
}

output "bridge" {
  value = kilnlocal_network.bridge.name
}

output "api_vip" {
  value = kilnlocal_load_balancer.api.listen
}

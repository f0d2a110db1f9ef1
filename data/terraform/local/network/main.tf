# Stage "network": the host bridge, and the API load balancer and the image
# registry (the registry add-on) on its gateway address: the nodes' image
# mirrors point there, so it runs before any machine boots. Applied first,
# destroyed last; re-applied with bootstrap_in_lb = false before the
# bootstrap stage is destroyed, and with daemon_state = "stopped" last by
# kiln stop cluster.

resource "kilnlocal_network" "bridge" {
  name       = var.bridge
  cidr       = var.machine_cidr
  gateway    = var.api_vip
  egress_nat = var.egress_nat
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
  # With egress NAT the machines' resolver is the host's address on the
  # bridge: the load balancer forwards DNS there to the host's resolvers.
  dns = var.egress_nat
}

resource "kilnlocal_registry" "images" {
  count  = var.registry == null ? 0 : 1
  name   = var.infra_id
  listen = kilnlocal_network.bridge.gateway
  port   = var.registry.port
  binary = var.registry.binary
  state  = var.daemon_state

  # Its files are in the API load balancer's directory, which the load
  # balancer's delete removes: so the registry is deleted first (stopped,
  # its storage removed), and never left running without its pid file.
  depends_on = [kilnlocal_load_balancer.api]
}

output "bridge" {
  value = kilnlocal_network.bridge.name
}

output "api_vip" {
  value = kilnlocal_load_balancer.api.listen
}

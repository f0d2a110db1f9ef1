# Stage "cluster": masters and workers, each keyed by its machine name so
# that a day-2 change (kiln scale cluster) can remove any one of them, and
# the LoadBalancer Service controller, which proxies to them.
# hosts and ignition are read at a machine's first boot only: a later change
# of them (a machine added elsewhere, a master joining with its full config)
# must not replace the machines that run. state (running or stopped) changes
# in place: kiln stop/start cluster apply the stage with machine_states.

locals {
  masters = zipmap(var.master_names, var.master_addresses)
  workers = zipmap(var.worker_names, var.worker_addresses)
}

resource "kilnlocal_machine" "master" {
  for_each     = local.masters
  name         = each.key
  image        = lookup(var.machine_images, each.key, var.node_image)
  bridge       = var.bridge
  address      = "${each.value}/${local.prefix_len}"
  hosts        = local.hosts
  routes       = local.routes
  gateway      = local.gateway
  ignition     = var.master_ignition
  cpus         = var.master_cpus
  memory_bytes = var.master_memory_mib * 1048576
  binds        = local.kiln_bind
  env = {
    KILN_ROLE    = "master"
    KILN_NODE_IP = each.value
  }
  state = lookup(var.machine_states, each.key, "running")

  lifecycle {
    ignore_changes = [hosts, ignition]
  }
}

resource "kilnlocal_machine" "worker" {
  for_each     = local.workers
  name         = each.key
  image        = lookup(var.machine_images, each.key, var.node_image)
  bridge       = var.bridge
  address      = "${each.value}/${local.prefix_len}"
  hosts        = local.hosts
  routes       = local.routes
  gateway      = local.gateway
  ignition     = var.worker_ignition
  cpus         = var.worker_cpus
  memory_bytes = var.worker_memory_mib * 1048576
  binds        = local.kiln_bind
  env = {
    KILN_ROLE    = "worker"
    KILN_NODE_IP = each.value
  }
  state = lookup(var.machine_states, each.key, "running")

  lifecycle {
    ignore_changes = [hosts, ignition]
  }
}

resource "kilnlocal_service_load_balancer" "services" {
  count      = var.service_lb_pool == null ? 0 : 1
  name       = var.infra_id
  bridge     = var.bridge
  network    = var.machine_cidr
  host       = var.api_vip
  pool_first = var.service_lb_pool.first
  pool_last  = var.service_lb_pool.last
  machines   = merge(local.masters, local.workers)
  kubeconfig = var.service_lb_kubeconfig
  state      = var.daemon_state
}

output "master_addresses" {
  value = var.master_addresses
}

output "worker_addresses" {
  value = var.worker_addresses
}

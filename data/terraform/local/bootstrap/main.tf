# Stage "bootstrap": the bootstrap machine alone, so that it can be destroyed
# once the control plane runs on the masters.

resource "kilnlocal_machine" "bootstrap" {
  name         = "${var.infra_id}-bootstrap"
  image        = var.node_image
  bridge       = var.bridge
  address      = "${var.bootstrap_address}/${local.prefix_len}"
  hosts        = local.hosts
  routes       = local.routes
  gateway      = local.gateway
  ignition     = var.bootstrap_ignition
  cpus         = var.bootstrap_cpus
  memory_bytes = var.bootstrap_memory_mib * 1048576
  binds        = local.kiln_bind
  env = {
    KILN_ROLE    = "bootstrap"
    KILN_NODE_IP = var.bootstrap_address
  }
  state = lookup(var.machine_states, "${var.infra_id}-bootstrap", "running")
}

output "bootstrap_address" {
  value = var.bootstrap_address
}

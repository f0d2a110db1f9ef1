# Stage "cluster": masters and workers.

resource "kilnlocal_machine" "master" {
  count        = var.master_count
  name         = "${var.infra_id}-master-${count.index}"
  image        = var.node_image
  bridge       = var.bridge
  address      = "${var.master_addresses[count.index]}/${local.prefix_len}"
  hosts        = local.hosts
  routes       = local.routes
  ignition     = var.master_ignition
  cpus         = var.master_cpus
  memory_bytes = var.master_memory_mib * 1048576
  binds        = local.kiln_bind
  env = {
    KILN_ROLE    = "master"
    KILN_NODE_IP = var.master_addresses[count.index]
  }

  lifecycle {
    precondition {
      condition     = length(var.master_addresses) == var.master_count
      error_message = "master_addresses must have master_count entries."
    }
  }
}

resource "kilnlocal_machine" "worker" {
  count        = var.worker_count
  name         = "${var.infra_id}-worker-${count.index}"
  image        = var.node_image
  bridge       = var.bridge
  address      = "${var.worker_addresses[count.index]}/${local.prefix_len}"
  hosts        = local.hosts
  routes       = local.routes
  ignition     = var.worker_ignition
  cpus         = var.worker_cpus
  memory_bytes = var.worker_memory_mib * 1048576
  binds        = local.kiln_bind
  env = {
    KILN_ROLE    = "worker"
    KILN_NODE_IP = var.worker_addresses[count.index]
  }

  lifecycle {
    precondition {
      condition     = length(var.worker_addresses) == var.worker_count
      error_message = "worker_addresses must have worker_count entries."
    }
  }
}

output "master_addresses" {
  value = var.master_addresses
}

output "worker_addresses" {
  value = var.worker_addresses
}

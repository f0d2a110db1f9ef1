# Stage "cluster": the masters and workers, each keyed by its name so that a
# day-2 change can remove any one of them. ignition is read at a host's
# install only: a later change (a master joining with its full config) must
# not reset the hosts that run.

resource "kilnssh_host" "master" {
  for_each  = { for h in var.masters : h.name => h }
  name      = each.key
  address   = each.value.address
  ignition  = var.master_ignition
  payload   = coalesce(each.value.payload, var.payload)
  api_proxy   = var.api_proxy
  ntp_servers = var.ntp_servers
  state       = each.value.state
  env = {
    KILN_ROLE    = "master"
    KILN_NODE_IP = each.value.ip
  }

  lifecycle {
    ignore_changes = [ignition, api_proxy, ntp_servers]
  }
}

resource "kilnssh_host" "worker" {
  for_each  = { for h in var.workers : h.name => h }
  name      = each.key
  address   = each.value.address
  ignition  = var.worker_ignition
  payload   = coalesce(each.value.payload, var.payload)
  api_proxy   = var.api_proxy
  ntp_servers = var.ntp_servers
  state       = each.value.state
  env = {
    KILN_ROLE    = "worker"
    KILN_NODE_IP = each.value.ip
  }

  lifecycle {
    ignore_changes = [ignition, api_proxy, ntp_servers]
  }
}

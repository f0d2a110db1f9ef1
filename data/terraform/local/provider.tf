# Provider and common values of every stage of the local platform.

terraform {
  required_version = ">= 1.5.0"
  required_providers {
    kilnlocal = {
      source = "kiln.dev/kiln/kilnlocal"
    }
  }
}

provider "kilnlocal" {
  machine_dir = var.machine_dir
  image_dir   = var.node_image
  lb_dir      = var.lb_dir
}

locals {
  prefix_len = split("/", var.machine_cidr)[1]
  domain     = "${var.cluster_name}.${var.base_domain}"

  # /etc/hosts of every machine: the API names on the VIP, and every machine.
  hosts = concat(
    [{ ip = var.api_vip, names = ["api.${local.domain}", "api-int.${local.domain}"] }],
    [{ ip = var.bootstrap_address, names = ["${var.infra_id}-bootstrap"] }],
    [for i, a in var.master_addresses : { ip = a, names = [var.master_names[i]] }],
    [for i, a in var.worker_addresses : { ip = a, names = [var.worker_names[i]] }],
  )

  # Every machine routes the service network on-link: a connect from a
  # machine's own network namespace (kube-apiserver to a webhook's ClusterIP)
  # needs a route before kube-proxy's DNAT applies. Never a default route:
  # that is the gateway below, with egress NAT only.
  routes = var.service_network

  # With egress NAT the machines' default route leads to the host, which
  # masquerades the machine network (kilnlocal_network's egress_nat).
  gateway = var.egress_nat ? var.api_vip : null

  kiln_bind = [{ source = var.kiln_binary, target = "/usr/local/bin/kiln", read_only = true }]
}

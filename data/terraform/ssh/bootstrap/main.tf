# Stage "bootstrap": the bootstrap host alone, so that it can be reset once
# the control plane runs on the masters.

resource "kilnssh_host" "bootstrap" {
  count       = var.bootstrap == null ? 0 : 1
  name        = var.bootstrap.name
  address     = var.bootstrap.address
  ignition    = var.bootstrap_ignition
  payload     = var.payload
  api_proxy   = var.api_proxy
  ntp_servers = var.ntp_servers
  state       = var.bootstrap.state
  env = {
    KILN_ROLE    = "bootstrap"
    KILN_NODE_IP = var.bootstrap.ip
  }
}

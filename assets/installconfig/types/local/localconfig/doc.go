// Package local is the install-config logic of the embedded default
// platform, whose cluster machines are systemd-nspawn containers on a host
// bridge: the defaults and validation of platform.local and of the machine
// pools' local sections. It is a leaf: assets import it, so it must never
// import provisioning. Provisioning lives in local/provision; the machines,
// the API load balancer, the node image and the Terraform provider in the
// other sub-packages.
package localconfig

// Package local is the embedded default platform: cluster machines are
// systemd-nspawn containers on a host bridge, booted from kiln's node image.
//
// The package has two halves. Config is the platform's install-config
// logic: the defaults of platform.local (the first machine network the host
// does not use, the API VIP on it) and their validation against the host's
// networks. Provisioner runs a cluster: Preflight checks the host; Provision
// lays the cluster out on the machine network (NewPlan, BridgeName), ensures
// the node image and applies the network, bootstrap and cluster Terraform
// stages through the provider in the kiln binary; DestroyBootstrap takes the
// bootstrap machine out of the load balancer and destroys it; Destroy takes
// the stages down in reverse and then removes every machine, load balancer
// and bridge named after the infra ID, so it works without state; Gather
// collects diagnostics from the bootstrap machine and the masters; and
// ProbeContainer is the container that runs `kiln node probe` on a node.
//
// The sub-packages do the work on the host: machine runs the machines, lb
// the API load balancer, nodeimage builds the node image and provider is the
// Terraform provider.
package local

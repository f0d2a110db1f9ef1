// Package provision provisions the local platform: it lays a cluster out on
// the host bridge (Plan), creates and destroys its machines, bridge and API
// load balancer through Terraform and the provider in the kiln binary, and
// gathers the machines' logs. The platform's install-config section and its
// address plan are contracts (assets/installconfig/types/local and its
// localconfig), which assets import without pulling any of this in.
package provision

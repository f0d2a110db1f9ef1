// Package provider is the Terraform provider of the local platform, served
// by the kiln binary itself (`kiln terraform-provider-kilnlocal`, plugin
// protocol 6) and installed by kiln into a filesystem mirror, so one build
// ships the installer and its provider and their versions never drift.
//
// Its source address is kiln.dev/kiln/kilnlocal. Resources:
//   - kilnlocal_network: a host bridge with the host's address on it
//     (machine.EnsureBridge / machine.DeleteBridge); no NAT, no route off the
//     host.
//   - kilnlocal_machine: one systemd-nspawn machine (machine.Manager); its
//     attributes map 1:1 to machine.Spec and any change replaces it, but
//     for state.
//   - kilnlocal_load_balancer: the API load balancer, a detached `kiln lb`
//     process (package lb) whose backends are updated in place.
//   - kilnlocal_service_load_balancer: the LoadBalancer Service controller,
//     a detached `kiln service-lb` process (package servicelb) whose
//     machines are updated in place.
//   - kilnlocal_registry: the registry add-on's image registry, kiln's
//     build of the distribution registry run detached (package registry);
//     its storage stays while it is stopped and goes with the resource.
//
// Each of the last four has a state attribute, "running" or "stopped"
// (platforms.MachineState): Read reports what the machine or process does
// and Update starts or stops it in place, so kiln creates, stops, starts
// and destroys a cluster by applying its Terraform stages, and the state
// always records what runs.
package provider

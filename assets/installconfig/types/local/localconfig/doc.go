// Package localconfig is the install-config logic of the local platform,
// kiln's default, whose machines are systemd-nspawn containers on a host
// bridge: the defaults and validation of platform.local and of the machine
// pools' local sections (package local), checked against the host's
// networks, and the address plan that gives each machine its address from
// its name. It is one of the contracts (test/layering): it imports only
// packages under assets/installconfig/types and assets/release, never the install-config asset or anything
// under platforms/. The local platform's provisioning is under
// platforms/local.
package localconfig

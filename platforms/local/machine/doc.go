// Package machine runs the machines of kiln's local platform: systemd-nspawn
// containers booted from the node image, each on a copy-on-write overlayfs
// root, attached to a host bridge, in a cgroup of its own that carries its
// resource limits.
//
// A machine outlives the process that created it: its nspawn process runs in
// a session of its own and everything needed to stop, inspect or enter it is
// recorded under Options.StateRoot, so a later process (another kiln run, the
// Terraform provider) can call State, List, Exec and Destroy.
//
// Every command line the package runs (systemd-nspawn, systemd-run, ip,
// mount, nsenter) is built by a pure function and unit-tested as argv; the
// commands themselves go through a Runner.
package machine

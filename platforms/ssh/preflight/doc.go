// Package preflight checks, before anything on them changes, that the
// hosts of an ssh-platform cluster can run their roles: the OS and its
// systemd, cgroups, kernel modules, free ports, clocks in step with this
// machine's, swap, unique hostnames and machine-ids, memory and disk. One
// script (facts.sh) runs on each host and reports what it offers; Check
// judges the reports, every problem of every host at once.
package preflight

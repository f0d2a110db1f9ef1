// Package sshconfig is the install-config logic of the ssh platform
// (package ssh): the defaults and validation of platform.ssh, and the
// names and addresses of the hosts, which kiln's machine inventory
// publishes. It is one of the contracts (test/layering) with package ssh.
package sshconfig

// Package local is the schema of the local platform's sections of
// install-config.yaml: platform.local and the machine pools' local
// sections. The local platform runs the cluster's machines as
// systemd-nspawn containers on a host bridge. Its defaults and validation
// are in local/localconfig; like package types, this package imports
// nothing of kiln.
package local

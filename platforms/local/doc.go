// Package local is the embedded default platform: cluster machines are
// systemd-nspawn containers on a host bridge, booted from kiln's node image.
// This package holds the platform's install-config section logic; its
// sub-packages run machines, the API load balancer and the node image.
package local

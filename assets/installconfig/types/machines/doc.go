// Package machines names a cluster's masters and workers: machine i of a
// role is <infraID>-<role>-<i>, and a machine's name is also its node's.
// The install-config's replica counts give a new cluster's names
// (DefaultShape); the platforms' address plans, the machine inventory,
// provisioning and the commands all read names through this package. It
// imports nothing of kiln.
package machines

// Package provision provisions ssh-platform clusters: it checks the
// user's hosts over SSH (preflight), builds the node payload, and applies
// the ssh platform's Terraform stages, whose kilnssh_host resources
// install each host, stop and start the node on it (kiln stop/start
// cluster) and reset it on destroy (docs/platform-ssh.md).
package provision

// Package ssh is the schema of the ssh platform's section of
// install-config.yaml: platform.ssh. The ssh platform installs a cluster
// onto Linux hosts the user already has (Debian 12 with systemd), which
// kiln reaches over SSH (docs/platform-ssh.md). Its defaults and
// validation are in ssh/sshconfig; like package types, this package
// imports nothing of kiln.
package ssh

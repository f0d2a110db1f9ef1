// Package tls holds kiln's PKI assets: the certificate authorities, the
// serving and client certificates of the control plane, and the service
// account signing key pair, each written to tls/<name>.crt (0644) and
// tls/<name>.key (0600) in --dir.
//
// Every certificate asset embeds CertKey, which generates, writes and loads
// it; a certificate the user put in --dir/tls/ beforehand (a kubeadm-style
// cert-dir) is checked and reused, and only the missing ones are generated.
// docs/pki.md lists every certificate, its subject, SANs, lifetime and users.
package tls

// Package bootstraptoken generates the credentials a machine joins with: the
// kubelet bootstrap token that nodes use to request their client
// certificates (TLS bootstrapping) with the kube-system Secret that makes
// kube-apiserver accept it, and the machine-config server's per-role tokens
// that the pointer configs present to fetch their full config.
package bootstraptoken

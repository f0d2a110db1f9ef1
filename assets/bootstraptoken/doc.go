// Package bootstraptoken generates the kubelet bootstrap token that nodes
// use to request their client certificates (TLS bootstrapping), and the
// kube-system Secret that makes kube-apiserver accept it.
package bootstraptoken

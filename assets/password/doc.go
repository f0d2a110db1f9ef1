// Package password generates the kubeadmin password: the file
// auth/kubeadmin-password (0600) for the user, and only its bcrypt hash for
// the cluster's manifests.
package password

// Package kubeconfig generates the kubeconfig files of the cluster: the
// admin kubeconfig for the user (auth/kubeconfig), the kubelet bootstrap
// kubeconfig (token auth) and the localhost kubeconfigs of the control plane
// components on masters. All are built with client-go's clientcmd and
// written with mode 0600.
package kubeconfig

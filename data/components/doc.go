// Package components holds the wrapper Go modules kiln builds the cluster's
// components from: kubernetes (kube-apiserver, kube-controller-manager,
// kube-scheduler, kube-proxy, kubelet, kubectl), etcd (etcd, etcdctl, etcdutl),
// coredns (with only the plugins of kiln's Corefile), pause,
// local-path-provisioner (with kiln's local-path-helper), metrics-server,
// kube-router (whose network policy controller enforces NetworkPolicies),
// metallb (the ssh platform's LoadBalancer add-on: controller and speaker),
// containerd (containerd, containerd-shim-runc-v2, ctr), runc, and registry
// (the distribution registry of the local platform's registry add-on, which
// runs on the host, not in the node image). Each directory holds go.mod.in
// (a text/template filled with the versions pinned in assets/release),
// go.sum.in (the checksums of every module the build needs, so builds are
// verified and reproducible) and optionally main.go.in. The ".in" suffixes
// exist because embed cannot include a directory holding a go.mod; kiln
// writes the files without the suffix into its cache and runs `go build`
// there.
package components

import "embed"

// FS holds one directory per wrapper module.
//
//go:embed kubernetes etcd coredns pause local-path-provisioner metrics-server kube-router metallb containerd runc registry
var FS embed.FS

// Package csrapprover is kiln's approver of kubelet certificates (`kiln
// node csr-approver`).
//
// Kubelets run with serverTLSBootstrap, so each asks for its serving
// certificate through a CSR with signer kubernetes.io/kubelet-serving, and
// Kubernetes approves none of those by itself. The agent approves one only
// when a node asks for its own machine's name and the addresses kiln
// assigned to it, as kiln's machine inventory (ConfigMap
// kube-system/kiln-machines, package assets/manifests/inventory) lists
// them, and none of them is on the deny list (the API's names and VIP, the
// Service and pod networks); what a kubelet reports in its Node's status is
// never consulted (Decide).
//
// A joining kubelet gets its first client certificate (signer
// kubernetes.io/kube-apiserver-client-kubelet) with a bootstrap token. The
// agent approves it only for a machine of the inventory that the token may
// claim (a token recorded for one machine by `kiln scale cluster` claims
// that machine only; the install-time token claims only machines without
// such a token), and only while no Node of that name exists
// (DecideNodeClient). A node renewing its own client certificate is left to
// kube-controller-manager.
//
// Any other such CSR is left pending and the reason logged. The agent runs
// on the bootstrap machine as a systemd unit with the admin kubeconfig (the
// masters join before any pod can run) and in the cluster as Deployment
// kiln-system/kiln-csr-approver (data/manifests/cluster/12-csr-approver.yaml);
// both may run at once. docs/pki.md explains why.
package csrapprover

// Package csrapprover is kiln's approver of kubelet serving certificates
// (`kiln node csr-approver`). Kubelets run with serverTLSBootstrap, so each
// asks for its serving certificate through a CSR with signer
// kubernetes.io/kubelet-serving, and Kubernetes approves none of those by
// itself. The agent approves a CSR only when a node asks for its own
// machine's name and the addresses kiln assigned to it, as kiln's machine
// inventory (ConfigMap kube-system/kiln-machines, package
// assets/manifests/inventory) lists them, and none of them is on the deny
// list (the API's names and VIP, the Service and pod networks); what a
// kubelet reports in its Node's status is never consulted. Any other
// kubelet serving CSR is left pending and the reason logged. It runs in
// the cluster as Deployment kiln-system/kiln-csr-approver
// (data/manifests/cluster/12-csr-approver.yaml); docs/pki.md explains why.
package csrapprover

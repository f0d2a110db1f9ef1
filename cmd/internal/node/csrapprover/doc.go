// Package csrapprover is kiln's approver of kubelet serving certificates
// (`kiln node csr-approver`). Kubelets run with serverTLSBootstrap, so each
// asks the cluster CA for its serving certificate through a CSR with signer
// kubernetes.io/kubelet-serving, and Kubernetes approves none of those by
// itself. The agent approves a CSR only when a node asks for itself (its own
// name and the addresses its Node object reports) with the serving usages;
// any other kubelet serving CSR is left pending and the reason logged. It
// runs in the cluster as Deployment kiln-system/kiln-csr-approver
// (data/manifests/cluster/12-csr-approver.yaml); docs/pki.md explains why.
package csrapprover

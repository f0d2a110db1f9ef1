// Package node holds the agents kiln runs on its machines as `kiln node ...`
// (the kiln binary is bound read-only into every machine): the
// machine-config server, bootkube, the etcd member installer, the pod
// network agent and the kubelet serving CSR approver. Each lives in its own
// sub-package.
package node

// Package inventory is kiln's machine inventory: the name, role and
// addresses of every master and worker kiln created, as kiln assigned
// them. It is published as ConfigMap kube-system/kiln-machines (data key
// machines.json), written at install time (manifests/05-machines.yaml) and
// by `kiln scale cluster` (a machine is added before it is created and
// removed after it is destroyed). Nodes cannot write it: kube-system
// ConfigMaps are outside what the Node authorizer grants, and no RBAC kiln
// ships grants it to anyone but administrators. kiln-csr-approver signs
// kubelet serving certificates only for the names and addresses it holds,
// never for what a kubelet reports about itself, and a node client
// certificate made with a bootstrap token only for a machine it holds,
// the one recorded with that token's ID when `kiln scale cluster` added
// the machine.
//
// The package is a leaf (types, JSON and the ConfigMap), so that the
// manifests, the scale command and the node agents share it.
package inventory

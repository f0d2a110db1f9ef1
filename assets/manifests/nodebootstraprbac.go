package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*NodeBootstrapRBAC)(nil)

const nodeBootstrapRBACTemplate = "cluster/01-rbac-node-bootstrap.yaml"

// NodeBootstrapRBAC is manifests/01-rbac-node-bootstrap.yaml: the RBAC that
// lets kubelets bootstrap with a token (create their client CSR, which
// kiln-csr-approver approves, not kube-controller-manager) and have the
// renewals of their own client certificates approved automatically.
type NodeBootstrapRBAC struct{ objects }

// ID implements graph.Asset.
func (*NodeBootstrapRBAC) ID() string { return "manifests/node-bootstrap-rbac" }

// Name implements graph.Asset.
func (*NodeBootstrapRBAC) Name() string { return "node bootstrap RBAC manifest" }

// Dependencies implements graph.Asset.
func (*NodeBootstrapRBAC) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *NodeBootstrapRBAC) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, nodeBootstrapRBACTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *NodeBootstrapRBAC) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, nodeBootstrapRBACTemplate)
}

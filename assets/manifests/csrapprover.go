package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*CSRApprover)(nil)

const csrApproverTemplate = "cluster/12-csr-approver.yaml"

// CSRApprover is manifests/12-csr-approver.yaml: the Deployment that runs
// `kiln node csr-approver` on a master, with its ServiceAccount and the RBAC
// to approve kubelet serving CSRs (signer kubernetes.io/kubelet-serving) only.
type CSRApprover struct{ objects }

// ID implements graph.Asset.
func (*CSRApprover) ID() string { return "manifests/csr-approver" }

// Name implements graph.Asset.
func (*CSRApprover) Name() string { return "kubelet serving CSR approver manifest" }

// Dependencies implements graph.Asset.
func (*CSRApprover) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *CSRApprover) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, csrApproverTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *CSRApprover) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, csrApproverTemplate)
}

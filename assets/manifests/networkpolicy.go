package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*NetworkPolicy)(nil)

const networkPolicyTemplate = "cluster/15-network-policy.yaml"

// NetworkPolicy is manifests/15-network-policy.yaml: kube-router's network
// policy controller as a DaemonSet with its read-only RBAC, which enforces
// NetworkPolicies on every node.
type NetworkPolicy struct{ objects }

// ID implements graph.Asset.
func (*NetworkPolicy) ID() string { return "manifests/network-policy" }

// Name implements graph.Asset.
func (*NetworkPolicy) Name() string { return "NetworkPolicy controller manifest" }

// Dependencies implements graph.Asset.
func (*NetworkPolicy) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *NetworkPolicy) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, networkPolicyTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *NetworkPolicy) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, networkPolicyTemplate)
}

package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*ClusterConfig)(nil)

const clusterConfigTemplate = "cluster/03-cluster-config.yaml"

// ClusterConfig is manifests/03-cluster-config.yaml: the effective cluster
// configuration as a ConfigMap in kube-system.
type ClusterConfig struct{ objects }

// ID implements graph.Asset.
func (*ClusterConfig) ID() string { return "manifests/cluster-config" }

// Name implements graph.Asset.
func (*ClusterConfig) Name() string { return "cluster configuration manifest" }

// Dependencies implements graph.Asset.
func (*ClusterConfig) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *ClusterConfig) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, clusterConfigTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *ClusterConfig) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, clusterConfigTemplate)
}

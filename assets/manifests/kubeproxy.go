package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeProxy)(nil)

const kubeProxyTemplate = "cluster/10-kube-proxy.yaml"

// KubeProxy is manifests/10-kube-proxy.yaml: the kube-proxy DaemonSet
// (nftables mode) with its configuration and RBAC.
type KubeProxy struct{ objects }

// ID implements graph.Asset.
func (*KubeProxy) ID() string { return "manifests/kube-proxy" }

// Name implements graph.Asset.
func (*KubeProxy) Name() string { return "kube-proxy manifest" }

// Dependencies implements graph.Asset.
func (*KubeProxy) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *KubeProxy) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, kubeProxyTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *KubeProxy) Load(f graph.FileFetcher) (bool, error) { return m.loadOne(f, kubeProxyTemplate) }

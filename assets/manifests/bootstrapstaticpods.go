package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*BootstrapStaticPods)(nil)

// BootstrapStaticPods is static-pods/bootstrap/*.yaml: the temporary
// control plane (single-member etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler) the bootstrap machine's kubelet runs.
type BootstrapStaticPods struct{ staticPods }

// ID implements graph.Asset.
func (*BootstrapStaticPods) ID() string { return "static-pods/bootstrap" }

// Name implements graph.Asset.
func (*BootstrapStaticPods) Name() string { return "bootstrap static pods" }

// Dependencies implements graph.Asset.
func (*BootstrapStaticPods) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (s *BootstrapStaticPods) Generate(_ context.Context, p graph.Parents) error {
	return s.generate(p, "bootstrap", true)
}

// Load implements graph.WritableAsset.
func (s *BootstrapStaticPods) Load(f graph.FileFetcher) (bool, error) {
	return s.loadRole(f, "bootstrap")
}

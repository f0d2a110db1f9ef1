package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*MasterStaticPods)(nil)

// MasterStaticPods is static-pods/master/*.yaml: the production control
// plane every master runs. Its kube-apiserver, kube-controller-manager and
// kube-scheduler are in the masters' Ignition config; its etcd is installed
// by bootkube once the member has been added (EtcdInitialClusterMarker).
type MasterStaticPods struct{ staticPods }

// ID implements graph.Asset.
func (*MasterStaticPods) ID() string { return "static-pods/master" }

// Name implements graph.Asset.
func (*MasterStaticPods) Name() string { return "master static pods" }

// Dependencies implements graph.Asset.
func (*MasterStaticPods) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (s *MasterStaticPods) Generate(_ context.Context, p graph.Parents) error {
	return s.generate(p, "master", false)
}

// Load implements graph.WritableAsset.
func (s *MasterStaticPods) Load(f graph.FileFetcher) (bool, error) { return s.loadRole(f, "master") }

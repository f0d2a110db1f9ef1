package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*CoreDNS)(nil)

const coreDNSTemplate = "cluster/11-coredns.yaml"

// CoreDNS is manifests/11-coredns.yaml: cluster DNS: the CoreDNS
// Deployment and the kube-dns Service at the DNS service IP.
type CoreDNS struct{ objects }

// ID implements graph.Asset.
func (*CoreDNS) ID() string { return "manifests/coredns" }

// Name implements graph.Asset.
func (*CoreDNS) Name() string { return "CoreDNS manifest" }

// Dependencies implements graph.Asset.
func (*CoreDNS) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *CoreDNS) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, coreDNSTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *CoreDNS) Load(f graph.FileFetcher) (bool, error) { return m.loadOne(f, coreDNSTemplate) }

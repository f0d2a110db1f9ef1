package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*Namespaces)(nil)

const namespacesTemplate = "cluster/00-namespaces.yaml"

// Namespaces is manifests/00-namespaces.yaml: the namespaces kiln's own
// components live in.
type Namespaces struct{ objects }

// ID implements graph.Asset.
func (*Namespaces) ID() string { return "manifests/namespaces" }

// Name implements graph.Asset.
func (*Namespaces) Name() string { return "namespaces manifest" }

// Dependencies implements graph.Asset.
func (*Namespaces) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *Namespaces) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, namespacesTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *Namespaces) Load(f graph.FileFetcher) (bool, error) { return m.loadOne(f, namespacesTemplate) }

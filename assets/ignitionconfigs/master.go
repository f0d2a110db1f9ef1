package ignitionconfigs

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*Master)(nil)

// Master is master.ign: the pointer config every master boots with.
type Master struct{ pointer }

// ID implements graph.Asset.
func (*Master) ID() string { return "ignition/master" }

// Name implements graph.Asset.
func (*Master) Name() string { return "master Ignition config" }

// Dependencies implements graph.Asset.
func (*Master) Dependencies() []graph.Asset { return pointerDeps() }

// Generate implements graph.Asset.
func (m *Master) Generate(_ context.Context, p graph.Parents) error { return m.generate(p, RoleMaster) }

// Load implements graph.WritableAsset.
func (m *Master) Load(f graph.FileFetcher) (bool, error) { return m.load(f, RoleMaster) }

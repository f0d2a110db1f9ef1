package ignitionconfigs

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*Worker)(nil)

// Worker is worker.ign: the pointer config every worker boots with.
type Worker struct{ pointer }

// ID implements graph.Asset.
func (*Worker) ID() string { return "ignition/worker" }

// Name implements graph.Asset.
func (*Worker) Name() string { return "worker Ignition config" }

// Dependencies implements graph.Asset.
func (*Worker) Dependencies() []graph.Asset { return pointerDeps() }

// Generate implements graph.Asset.
func (m *Worker) Generate(_ context.Context, p graph.Parents) error { return m.generate(p, RoleWorker) }

// Load implements graph.WritableAsset.
func (m *Worker) Load(f graph.FileFetcher) (bool, error) { return m.load(f, RoleWorker) }

package provision

import (
	"context"
	"fmt"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

var _ platforms.UnitChecker = (*Provisioner)(nil)

// machineExecer is what FailedUnits needs of a *machine.Manager.
type machineExecer interface {
	State(ctx context.Context, name string) (machine.State, error)
	Exec(ctx context.Context, name string, argv ...string) ([]byte, error)
}

// FailedUnits implements platforms.UnitChecker: it asks systemd inside
// each running machine of c (the bootstrap machine until bootstrap is
// done, the masters, the workers) for its failed units and each one's
// last journal line.
func (p *Provisioner) FailedUnits(ctx context.Context, c *platforms.Cluster) ([]platforms.FailedUnit, error) {
	var names []string
	if !c.BootstrapDone {
		names = append(names, bootstrapMachine(c.InfraID))
	}
	names = append(names, c.Machines().All()...)
	return failedUnits(ctx, p.machines(), names), nil
}

// failedUnits asks each running machine of names, in order, for its
// failed units (platforms.FailedUnitsOf). A machine that does not run is
// not asked.
func failedUnits(ctx context.Context, m machineExecer, names []string) []platforms.FailedUnit {
	return platforms.FailedUnitsOf(ctx, func(ctx context.Context, name string, argv ...string) ([]byte, error) {
		if st, err := m.State(ctx, name); err != nil || st != machine.StateRunning {
			return nil, fmt.Errorf("machine %s does not run (%s, %v)", name, st, err)
		}
		return m.Exec(ctx, name, argv...)
	}, names)
}

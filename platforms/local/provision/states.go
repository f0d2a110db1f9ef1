package provision

import (
	"context"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

var (
	_ platforms.MachineStater = (*Provisioner)(nil)
	_ platforms.Restarter     = (*Provisioner)(nil)
)

// machines returns the Manager of the provisioner's machines, made once:
// the waits ask for machine states every few seconds.
func (p *Provisioner) machines() *machine.Manager {
	p.mgrOnce.Do(func() {
		p.mgr = machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log})
	})
	return p.mgr
}

// MachineStates implements platforms.MachineStater: masters and workers by
// machine name, which is their host name and so their node name.
func (p *Provisioner) MachineStates(ctx context.Context, c *platforms.Cluster) (map[string]platforms.MachineState, error) {
	mgr := p.machines()
	states := map[string]platforms.MachineState{}
	for _, n := range c.Machines().All() {
		st, err := mgr.State(ctx, n)
		if err != nil {
			return nil, err
		}
		states[n] = st
	}
	return states, nil
}

package provision

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

var _ platforms.Gatherer = (*Provisioner)(nil)

// Gather implements platforms.Gatherer: the diagnostics of the bootstrap
// machine and the masters, one directory per machine. A command that fails
// leaves its error in the file instead; only a machine that cannot be
// entered at all is an error.
func (p *Provisioner) Gather(ctx context.Context, _, infraID, dir string) error {
	mgr := machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log})
	names, err := mgr.List(ctx, infraID+"-")
	if err != nil {
		return err
	}
	var errs []error
	found := 0
	for _, name := range names {
		if !controlPlane(infraID, name) {
			continue
		}
		found++
		end := p.Env.Progress.Start("Gathering logs from " + name)
		err := gatherMachine(ctx, mgr, name, filepath.Join(dir, name))
		end(err)
		errs = append(errs, err)
	}
	if found == 0 {
		return fmt.Errorf("no bootstrap machine or master of %s is running", infraID)
	}
	return errors.Join(errs...)
}

// controlPlane reports whether the machine called name is the bootstrap
// machine or a master of infraID.
func controlPlane(infraID, name string) bool {
	role, _, ok := machines.Index(infraID, name)
	return name == bootstrapMachine(infraID) || (ok && role == machines.RoleMaster)
}

func gatherMachine(ctx context.Context, mgr *machine.Manager, name, dir string) error {
	if state, err := mgr.State(ctx, name); err != nil || state != machine.StateRunning {
		return fmt.Errorf("machine %s is %s: %v", name, state, err)
	}
	return platforms.GatherMachine(ctx, func(ctx context.Context, _ string, argv ...string) ([]byte, error) {
		return mgr.Exec(ctx, name, argv...)
	}, name, dir)
}

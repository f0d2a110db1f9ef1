package provision

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/registry"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// Destroy implements platforms.Provisioner: the Terraform stages in reverse
// (the cluster stage's LoadBalancer Service controller takes its addresses
// off the bridge before the network stage deletes it; the network stage
// deletes the image registry, process and storage, before the API load
// balancer and its directory), then, as a safety net that needs no state,
// every machine, load balancer, registry and bridge named after infraID.
func (p *Provisioner) Destroy(ctx context.Context, dir, infraID string) error {
	var errs []error
	if dir != "" {
		if drv, err := p.driver(ctx, dir); err != nil {
			errs = append(errs, err)
		} else {
			for _, stage := range []string{terraform.StageCluster, terraform.StageBootstrap, terraform.StageNetwork} {
				vars, err := stageVars(drv, stage)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err == nil {
					end := p.Env.Progress.Start("Destroying Terraform stage " + stage)
					err = drv.Destroy(ctx, stage, vars)
					end(err)
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if infraID != "" {
		errs = append(errs, p.sweep(ctx, infraID))
	}
	return errors.Join(errs...)
}

// sweep removes what is named after infraID, whatever Terraform knows.
func (p *Provisioner) sweep(ctx context.Context, infraID string) error {
	end := p.Env.Progress.Start("Removing anything left of " + infraID)
	mgr := machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log})
	var errs []error
	names, err := mgr.List(ctx, infraID+"-")
	errs = append(errs, err)
	for _, n := range names {
		p.Env.Log.Infof("Destroying machine %s", n)
		errs = append(errs, mgr.Destroy(ctx, n))
	}
	dir := p.lbDir(infraID)
	errs = append(errs, p.stopServiceLB(ctx, infraID))
	// The registry's Delete stops it; one that Terraform did not know is
	// stopped here, before its pid file goes with the directory.
	errs = append(errs, registry.Process("", dir).Stop(ctx, 10*time.Second))
	proc := lb.ProcessIn(p.Env.Kiln, dir)
	if err := proc.Stop(ctx, 10*time.Second); err != nil && !errors.Is(err, lb.ErrNotRunning) {
		errs = append(errs, err)
	}
	errs = append(errs, os.RemoveAll(dir))
	run := machine.ExecRunner{Log: p.Env.Log}
	errs = append(errs, machine.Egress{Run: run}.Disable(ctx, BridgeName(infraID)))
	errs = append(errs, machine.DeleteBridge(ctx, run, BridgeName(infraID)))
	err = errors.Join(errs...)
	end(err)
	return err
}

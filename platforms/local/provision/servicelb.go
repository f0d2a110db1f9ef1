package provision

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/lb"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
)

// lbDir returns the directory of the cluster's load balancer files.
func (p *Provisioner) lbDir(infraID string) string {
	dir := p.LBDir
	if dir == "" {
		dir = provider.DefaultLBDir
	}
	return filepath.Join(dir, infraID)
}

// startServiceLB writes the configuration of the cluster's LoadBalancer
// Service controller (`kiln service-lb`, detached, beside the API load
// balancer) and starts it unless it runs already or the add-on is off. It
// watches the API with a copy of the admin kubeconfig and waits for it to
// answer by itself.
func (p *Provisioner) startServiceLB(ctx context.Context, c *platforms.Cluster, plan *Plan, kiln string) error {
	if plan.ServiceLB.Size() == 0 {
		return nil
	}
	if err := p.writeServiceLB(c, plan); err != nil {
		return err
	}
	proc := servicelb.Process(kiln, p.lbDir(c.InfraID))
	if _, err := proc.PID(); err == nil {
		return nil
	}
	end := p.Env.Progress.Start(fmt.Sprintf("Starting the LoadBalancer Service controller (addresses %s)", plan.ServiceLB))
	_, err := proc.Start(ctx)
	end(err)
	return err
}

// writeServiceLB writes the files of the cluster's LoadBalancer Service
// controller for plan, when the add-on is on. A controller that runs reads
// the machines again: after a scale, new machines get traffic and removed
// ones none.
func (p *Provisioner) writeServiceLB(c *platforms.Cluster, plan *Plan) error {
	if plan.ServiceLB.Size() == 0 {
		return nil
	}
	// Read without following a link in --dir: the controller acts with
	// these credentials, so they must be the cluster's own.
	kc, err := atomicfile.ReadFile(c.Dir, filepath.Join(c.Dir, filepath.FromSlash(kubeconfig.AdminPath)))
	if err != nil {
		return fmt.Errorf("the LoadBalancer Service controller needs the admin kubeconfig: %w", err)
	}
	return servicelb.WriteFiles(p.lbDir(c.InfraID), serviceLBConfig(plan), kc)
}

// serviceLBConfig is the configuration of the LoadBalancer Service
// controller of plan: its bridge and address pool, and the addresses plan
// gives the masters and workers, the only places it proxies to (never an
// address a Node reports).
func serviceLBConfig(plan *Plan) servicelb.Config {
	m := servicelb.Machines{Network: plan.CIDR, Host: plan.VIP, Addresses: map[string]netip.Addr{}}
	for i, n := range plan.MasterNames {
		m.Addresses[n] = plan.Masters[i]
	}
	for i, n := range plan.WorkerNames {
		m.Addresses[n] = plan.Workers[i]
	}
	return servicelb.Config{Bridge: plan.Bridge, Pool: plan.ServiceLB, Machines: m}
}

// stopServiceLB stops the cluster's LoadBalancer Service controller, which
// takes its addresses off the bridge; one that does not run is fine.
func (p *Provisioner) stopServiceLB(ctx context.Context, infraID string) error {
	err := servicelb.Process(p.Env.Kiln, p.lbDir(infraID)).Stop(ctx, 10*time.Second)
	if errors.Is(err, lb.ErrNotRunning) {
		return nil
	}
	return err
}

package provision

import (
	"context"
	"errors"
	"fmt"
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

// startServiceLB starts the cluster's LoadBalancer Service controller
// (`kiln service-lb`, detached, beside the API load balancer) unless it
// runs already or the add-on is off. It watches the API with a copy of the
// admin kubeconfig and waits for it to answer by itself.
func (p *Provisioner) startServiceLB(ctx context.Context, c *platforms.Cluster, plan *Plan, kiln string) error {
	if plan.ServiceLB.Size() == 0 {
		return nil
	}
	dir := p.lbDir(c.InfraID)
	proc := servicelb.Process(kiln, dir)
	if _, err := proc.PID(); err == nil {
		return nil
	}
	// Read without following a link in --dir: the controller acts with
	// these credentials, so they must be the cluster's own.
	kc, err := atomicfile.ReadFile(c.Dir, filepath.Join(c.Dir, filepath.FromSlash(kubeconfig.AdminPath)))
	if err != nil {
		return fmt.Errorf("the LoadBalancer Service controller needs the admin kubeconfig: %w", err)
	}
	if err := servicelb.WriteFiles(dir, servicelb.Config{Bridge: plan.Bridge, Pool: plan.ServiceLB}, kc); err != nil {
		return err
	}
	end := p.Env.Progress.Start(fmt.Sprintf("Starting the LoadBalancer Service controller (addresses %s)", plan.ServiceLB))
	_, err = proc.Start(ctx)
	end(err)
	return err
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

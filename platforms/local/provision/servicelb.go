package provision

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
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

// setServiceLB sets the variables of the cluster stage's LoadBalancer
// Service controller (kilnlocal_service_load_balancer, beside the API load
// balancer): plan's address pool, and the admin kubeconfig it watches the
// API with when v has none yet; none of them when the add-on is off. The
// stage gives it the addresses plan gives the masters and workers, the
// only places it proxies to (never an address a Node reports).
func (p *Provisioner) setServiceLB(c *platforms.Cluster, plan *Plan, v *tfdata.LocalVars) error {
	if plan.ServiceLB.Size() == 0 {
		v.ServiceLBPool, v.ServiceLBKubeconfig = nil, ""
		return nil
	}
	v.ServiceLBPool = &tfdata.AddressRange{First: plan.ServiceLB.First.String(), Last: plan.ServiceLB.Last.String()}
	if v.ServiceLBKubeconfig != "" {
		return nil
	}
	// Read without following a link in --dir: the controller acts with
	// these credentials, so they must be the cluster's own.
	kc, err := atomicfile.ReadFile(c.Dir, filepath.Join(c.Dir, filepath.FromSlash(installdir.AdminKubeconfig)))
	if err != nil {
		return fmt.Errorf("the LoadBalancer Service controller needs the admin kubeconfig: %w", err)
	}
	v.ServiceLBKubeconfig = string(kc)
	return nil
}

// stopServiceLB stops the cluster's LoadBalancer Service controller, which
// takes its addresses off the bridge; one that does not run is fine. Only
// destroy's sweep calls it: everything else goes through the cluster stage.
func (p *Provisioner) stopServiceLB(ctx context.Context, infraID string) error {
	return servicelb.Process(p.Env.Kiln, p.lbDir(infraID)).Stop(ctx, 10*time.Second)
}

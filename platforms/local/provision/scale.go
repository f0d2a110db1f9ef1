package provision

import (
	"context"
	"fmt"
	"slices"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var _ platforms.Scaler = (*Provisioner)(nil)

// Resources of the cluster stage, one instance per machine name.
const (
	masterResource = "kilnlocal_machine.master"
	workerResource = "kilnlocal_machine.worker"
)

// ApplyMachines implements platforms.Scaler: the cluster stage applied with
// exactly c.Shape's machines, all running, the LoadBalancer Service
// controller's list of them updated in place. A machine it creates boots
// from c.Full's config of its role when there is one (a day-2 join: the
// full config with the machine's own join token), and from the node image
// of its release (machineImages); the machines that run keep theirs, as
// the stage ignores a change of ignition and hosts.
func (p *Provisioner) ApplyMachines(ctx context.Context, c *platforms.Cluster) error {
	plan, drv, err := p.planAndDriver(ctx, c, c.Machines())
	if err != nil {
		return err
	}
	net, err := stageVars(drv, terraform.StageNetwork)
	if err != nil {
		return fmt.Errorf("no cluster was provisioned from %s: %w", c.Dir, err)
	}
	vars := plan.Vars(c, net.NodeImage, net.KilnBinary)
	vars.BootstrapInLB = false
	if vars.MachineImages, err = p.machineImages(ctx, c, drv); err != nil {
		return err
	}
	if full := c.Full[machines.RoleMaster]; full != nil {
		vars.MasterIgnition = string(full)
	}
	if full := c.Full[machines.RoleWorker]; full != nil {
		vars.WorkerIgnition = string(full)
	}
	if err := p.setServiceLB(c, plan, &vars); err != nil {
		return err
	}
	title := fmt.Sprintf("Applying the machines: masters %s; workers %s", platforms.NameList(plan.MasterNames), platforms.NameList(plan.WorkerNames))
	return p.apply(ctx, drv, []step{{terraform.StageCluster, title, vars}})
}

// SetAPIBackends implements platforms.Scaler: the network stage applied
// again with its last variables but masters as the load balancer's
// backends (API and machine-config server).
func (p *Provisioner) SetAPIBackends(ctx context.Context, c *platforms.Cluster, masters []string) error {
	plan, drv, err := p.planAndDriver(ctx, c, machines.Shape{Masters: masters})
	if err != nil {
		return err
	}
	vars, err := stageVars(drv, terraform.StageNetwork)
	if err != nil {
		return fmt.Errorf("no cluster was provisioned from %s: %w", c.Dir, err)
	}
	vars.MasterNames, vars.MasterAddresses = plan.MasterNames, addrStrings(plan.Masters)
	vars.BootstrapInLB = false
	return p.apply(ctx, drv, []step{{terraform.StageNetwork, "Setting the API load balancer's backends to " + platforms.NameList(masters), vars}})
}

// APIBackends implements platforms.Scaler: the masters the network stage
// was last applied with.
func (p *Provisioner) APIBackends(ctx context.Context, c *platforms.Cluster) ([]string, error) {
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return nil, err
	}
	vars, err := stageVars(drv, terraform.StageNetwork)
	if err != nil {
		return nil, err
	}
	return vars.MasterNames, nil
}

// applyCluster applies the cluster stage, first moving the machines of a
// cluster created before machines were keyed by name (count indexes) to
// their names, so that none is replaced.
func (p *Provisioner) applyCluster(ctx context.Context, drv *terraform.Driver, vars tfdata.LocalVars) error {
	in, err := drv.Instances(terraform.StageCluster)
	if err != nil {
		return err
	}
	if moves := countMoves(in); len(moves) > 0 {
		p.Env.Log.Infof("Moving %d machines of the cluster stage's state from count indexes to names", len(moves))
		if err := drv.Move(ctx, terraform.StageCluster, vars, moves); err != nil {
			return err
		}
	}
	return drv.Apply(ctx, terraform.StageCluster, vars)
}

// countMoves returns the state moves that key the masters and workers
// recorded by count index by their machine names instead.
func countMoves(in []terraform.Instance) [][2]string {
	var moves [][2]string
	for _, i := range in {
		if i.Resource != masterResource && i.Resource != workerResource {
			continue
		}
		if _, isIndex := i.Key.(float64); !isIndex || i.Name == "" {
			continue
		}
		to := terraform.Instance{Resource: i.Resource, Key: i.Name}
		moves = append(moves, [2]string{i.Address(), to.Address()})
	}
	return moves
}

// normalizeVars fills in the machine names of variables written before
// machines were keyed by name: their addresses were in index order.
func normalizeVars(v *tfdata.LocalVars) {
	if len(v.MasterNames) == 0 && len(v.MasterAddresses) > 0 {
		v.MasterNames = machines.DefaultShape(v.InfraID, len(v.MasterAddresses), 0).Masters
	}
	if len(v.WorkerNames) == 0 && len(v.WorkerAddresses) > 0 {
		v.WorkerNames = machines.DefaultShape(v.InfraID, 0, len(v.WorkerAddresses)).Workers
	}
}

// machineImages returns the node image of each machine of c that boots
// another release than the cluster's node image, as imagesOf says, from
// the cluster stage's last variables; a release's node image is built
// when the cache lacks it.
func (p *Provisioner) machineImages(ctx context.Context, c *platforms.Cluster, drv *terraform.Driver) (map[string]string, error) {
	prev, err := optionalStageVars(drv, terraform.StageCluster)
	if err != nil {
		return nil, err
	}
	return imagesOf(c, prev, func(version string) (string, error) {
		img, err := p.nodeImage(ctx, version, true)
		if err != nil {
			return "", err
		}
		return img.RootFS, nil
	})
}

// imagesOf returns the node image of each machine of c that boots another
// release than the cluster's node image (platforms.Cluster.Releases): for
// a machine the cluster stage prev was applied with, its image there (an
// image never changes under a machine, which would be replaced: a machine
// created from the cluster's node image keeps it), else image of the
// machine's release.
func imagesOf(c *platforms.Cluster, prev *tfdata.LocalVars, image func(version string) (string, error)) (map[string]string, error) {
	var exists []string
	if prev != nil {
		exists = slices.Concat(prev.MasterNames, prev.WorkerNames)
	}
	images := map[string]string{}
	for _, m := range c.Machines().All() {
		switch v := c.ReleaseOf(m); {
		case slices.Contains(exists, m):
			if img, ok := prev.MachineImages[m]; ok {
				images[m] = img
			}
		case v != c.Resolved.Release.Kubernetes:
			img, err := image(v)
			if err != nil {
				return nil, fmt.Errorf("the node image of %s, which %s boots: %w", v, m, err)
			}
			images[m] = img
		}
	}
	return images, nil
}

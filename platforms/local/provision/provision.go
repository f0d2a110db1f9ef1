package provision

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/nodeimage"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var _ platforms.Provisioner = (*Provisioner)(nil)

// Provisioner provisions local clusters: systemd-nspawn machines on a host
// bridge, through Terraform and the provider in the kiln binary.
type Provisioner struct {
	Env platforms.Env
	// StateRoot is the machines' state root; machine.DefaultStateRoot when empty.
	StateRoot string
	// LBDir holds the load balancers' files; provider.DefaultLBDir when empty.
	LBDir string
	// EnsureRegistry returns the binary of the registry add-on's image
	// registry; nodeimage.EnsureRegistry, which builds it into the cache
	// on first use, when nil.
	EnsureRegistry func(context.Context, nodeimage.Options) (string, error)

	mgrOnce sync.Once
	mgr     *machine.Manager
}

// Preflight implements platforms.Provisioner.
func (p *Provisioner) Preflight(ctx context.Context, c *platforms.Cluster) error {
	end := p.Env.Progress.Start("Checking the host")
	// A resumed create counts only the machines still to start: the running
	// ones already hold their share of the host's resources.
	running, _ := machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log}).List(ctx, c.InfraID+"-")
	limits := memoryToStart(c, running)
	rep, err := machine.Preflight(ctx, machine.PreflightOptions{Machines: len(limits), MemoryLimits: limits, StateRoot: p.StateRoot,
		SlowerControlPlane: c.Config.SlowerControlPlane(), EgressNAT: c.Resolved.NAT()})
	end(err)
	for _, w := range rep.Warnings {
		p.Env.Log.Warn(w)
	}
	for _, n := range rep.Notes {
		p.Env.Log.Info(n)
	}
	if err != nil {
		return err
	}
	p.Env.Log.Infof("Machines run in cgroup mode %s; CPU and memory limits are enforced", rep.Mode)
	return nil
}

// memoryToStart returns the memory limit in bytes (0: none) of each machine
// of c that does not run yet: the bootstrap machine, the masters, the workers.
func memoryToStart(c *platforms.Cluster, running []string) []int64 {
	master, worker := machinePools(c.Config)
	var limits []int64
	add := func(name string, mp local.MachinePool) {
		if !slices.Contains(running, name) {
			limits = append(limits, mp.MemoryMiB<<20)
		}
	}
	if !c.BootstrapDone {
		add(c.InfraID+"-bootstrap", master)
	}
	shape := c.Machines()
	for _, n := range shape.Masters {
		add(n, master)
	}
	for _, n := range shape.Workers {
		add(n, worker)
	}
	return limits
}

// planAndDriver returns the plan of c with the machines of shape and the
// Terraform driver of c's directory; a plan the configuration cannot make
// is a platforms.ConfigError.
func (p *Provisioner) planAndDriver(ctx context.Context, c *platforms.Cluster, shape machines.Shape) (*Plan, *terraform.Driver, error) {
	plan, err := NewPlan(c.Config, c.Resolved.MachineNetwork, c.InfraID, shape)
	if err != nil {
		return nil, nil, &platforms.ConfigError{Err: err}
	}
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return nil, nil, err
	}
	return plan, drv, nil
}

// Provision implements platforms.Provisioner: the stages applied with
// every machine and daemon running, as Start applies them (see route.go),
// from the plan of c; the bootstrap stage only until bootstrap-complete.
// Then kiln's own images are pushed into the cluster's image registry,
// when it has one: content, not lifecycle, so a step of create alone,
// while the machines boot.
func (p *Provisioner) Provision(ctx context.Context, c *platforms.Cluster) error {
	plan, drv, err := p.planAndDriver(ctx, c, c.Machines())
	if err != nil {
		return err
	}
	// A cluster keeps the node image and kiln binary it was created with: a
	// resumed create with a newer kiln must not replace running machines.
	image, kiln := c.Config.Platform.Local.NodeImage, p.Env.Kiln
	if prev, err := stageVars(drv, terraform.StageNetwork); err == nil {
		image, kiln = prev.NodeImage, prev.KilnBinary
	}
	if image == "" {
		img, err := nodeimage.Ensure(ctx, nodeimage.Options{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress, Release: c.Resolved.Release, Proxy: c.Config.Proxy})
		if err != nil {
			return err
		}
		image = img.RootFS
	}
	vars := plan.Vars(c, image, kiln)
	vars.BootstrapInLB = !c.BootstrapDone
	if vars.MachineImages, err = p.machineImages(ctx, c, drv); err != nil {
		return err
	}
	cluster := vars
	if err := p.setServiceLB(c, plan, &cluster); err != nil {
		return err
	}
	net := vars
	if err := p.setRegistry(ctx, c, &net); err != nil {
		return err
	}
	st := stages{network: net, cluster: &cluster}
	if !c.BootstrapDone {
		st.bootstrap = &vars
	}
	t := titles{
		network:   fmt.Sprintf("Creating bridge %s and the API load balancer on %s", plan.Bridge, plan.VIP),
		bootstrap: "Creating the bootstrap machine",
		cluster:   fmt.Sprintf("Creating %d masters and %d workers", len(plan.Masters), len(plan.Workers)),
	}
	if cluster.ServiceLBPool != nil {
		t.cluster += fmt.Sprintf(" and the LoadBalancer Service controller (addresses %s)", plan.ServiceLB)
	}
	if r, ok := configs.ImageRegistry(c.Config); ok {
		t.network += fmt.Sprintf(", and the image registry %s (the nodes pull from %s)", r.Name, r.Endpoint)
	}
	if err := p.apply(ctx, drv, st.running(t)); err != nil {
		return err
	}
	return p.pushKilnImages(ctx, c, image)
}

// DestroyBootstrap implements platforms.Provisioner.
func (p *Provisioner) DestroyBootstrap(ctx context.Context, c *platforms.Cluster) error {
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return err
	}
	vars, err := stageVars(drv, terraform.StageNetwork)
	if err != nil {
		return err
	}
	vars.BootstrapInLB = false
	if err := p.apply(ctx, drv, []step{{terraform.StageNetwork, "Removing the bootstrap machine from the load balancer", vars}}); err != nil {
		return err
	}
	end := p.Env.Progress.Start("Destroying the bootstrap machine")
	err = drv.Destroy(ctx, terraform.StageBootstrap, vars)
	end(err)
	return err
}

// driver returns the Terraform driver of the cluster in dir.
func (p *Provisioner) driver(ctx context.Context, dir string) (*terraform.Driver, error) {
	modules, err := tfdata.Platform(local.Name)
	if err != nil {
		return nil, err
	}
	return terraform.EnsureDriver(ctx, terraform.BuildOptions{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress}, dir, modules,
		func(abs string) terraform.Provider { return provider.TerraformProvider(p.Env.Kiln, abs) })
}

// stageVars reads the variables a stage was last applied with, machine
// names filled in when they were written before machines had them.
func stageVars(drv *terraform.Driver, stage string) (tfdata.LocalVars, error) {
	var v tfdata.LocalVars
	if err := drv.LastVars(stage, &v); err != nil {
		return v, err
	}
	normalizeVars(&v)
	return v, nil
}

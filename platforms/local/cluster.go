package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/lb"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/nodeimage"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var _ platforms.Provisioner = (*Provisioner)(nil)

// Address plan inside machineNetwork[0]: the API VIP is the host's address
// on the bridge (defaulted to the first address), then fixed offsets.
const (
	bootstrapOffset = 10
	masterOffset    = 11
	workerOffset    = 20
)

// Provisioner provisions local clusters: systemd-nspawn machines on a host
// bridge, through Terraform and the provider in the kiln binary.
type Provisioner struct {
	Env platforms.Env
	// StateRoot is the machines' state root; machine.DefaultStateRoot when empty.
	StateRoot string
	// LBDir holds the load balancers' files; provider.DefaultLBDir when empty.
	LBDir string
}

// Plan is the local platform's layout of one cluster.
type Plan struct {
	Bridge    string
	CIDR      netip.Prefix
	VIP       netip.Addr
	Bootstrap netip.Addr
	Masters   []netip.Addr
	Workers   []netip.Addr
}

// BridgeName is the default bridge of infraID: "kiln-" and the infra ID's
// random suffix, within the 15 characters of an interface name.
func BridgeName(infraID string) string {
	suffix := infraID
	if i := strings.LastIndexByte(infraID, '-'); i >= 0 {
		suffix = infraID[i+1:]
	}
	if len(suffix) > 10 {
		suffix = suffix[:10]
	}
	return "kiln-" + suffix
}

// NewPlan lays out the cluster of c on the machine network.
func NewPlan(c *types.Config, infraID string) (*Plan, error) {
	if c.Platform.Local == nil || c.Networking == nil || len(c.Networking.MachineNetwork) == 0 {
		return nil, errors.New("install-config has no local platform section or machine network after defaulting")
	}
	cidr, err := netip.ParsePrefix(c.Networking.MachineNetwork[0].CIDR)
	if err != nil {
		return nil, err
	}
	cidr = cidr.Masked()
	p := &Plan{Bridge: c.Platform.Local.BridgeName, CIDR: cidr}
	if p.Bridge == "" {
		p.Bridge = BridgeName(infraID)
	}
	if p.VIP, err = netip.ParseAddr(c.APIVIP()); err != nil {
		return nil, fmt.Errorf("platform.local.apiVIP: %w", err)
	}
	at := func(off int) (netip.Addr, error) {
		a := cidr.Addr()
		for i := 0; i < off; i++ {
			a = a.Next()
		}
		if !cidr.Contains(a) || !cidr.Contains(a.Next()) {
			return netip.Addr{}, fmt.Errorf("machine network %s has no room for address offset %d", cidr, off)
		}
		return a, nil
	}
	if p.Bootstrap, err = at(bootstrapOffset); err != nil {
		return nil, err
	}
	for i := 0; i < c.MasterReplicas(); i++ {
		a, err := at(masterOffset + i)
		if err != nil {
			return nil, err
		}
		p.Masters = append(p.Masters, a)
	}
	for i := 0; i < c.WorkerReplicas(); i++ {
		a, err := at(workerOffset + i)
		if err != nil {
			return nil, err
		}
		p.Workers = append(p.Workers, a)
	}
	return p, nil
}

// Vars returns the Terraform variables of every stage.
func (p *Plan) Vars(c *platforms.Cluster, nodeImage, kiln string) tfdata.LocalVars {
	cfg := c.Config
	v := tfdata.LocalVars{
		ClusterName:       cfg.Metadata.Name,
		BaseDomain:        cfg.BaseDomain,
		InfraID:           c.InfraID,
		Bridge:            p.Bridge,
		MachineCIDR:       p.CIDR.String(),
		APIVIP:            p.VIP.String(),
		NodeImage:         nodeImage,
		KilnBinary:        kiln,
		BootstrapIgnition: string(c.Bootstrap),
		MasterIgnition:    string(c.Master),
		WorkerIgnition:    string(c.Worker),
		BootstrapAddress:  p.Bootstrap.String(),
		BootstrapInLB:     true,
		MasterCount:       len(p.Masters),
		MasterAddresses:   addrStrings(p.Masters),
		WorkerCount:       len(p.Workers),
		WorkerAddresses:   addrStrings(p.Workers),
	}
	pool := func(mp *types.MachinePool) *types.LocalMachinePool {
		if mp != nil && mp.Platform.Local != nil {
			return mp.Platform.Local
		}
		if d := cfg.Platform.Local.DefaultMachinePlatform; d != nil {
			return d
		}
		return &types.LocalMachinePool{}
	}
	m := pool(cfg.ControlPlane)
	v.BootstrapCPUs, v.BootstrapMemoryMiB = m.CPUs, m.MemoryMiB
	v.MasterCPUs, v.MasterMemoryMiB = m.CPUs, m.MemoryMiB
	var w *types.MachinePool
	if len(cfg.Compute) > 0 {
		w = &cfg.Compute[0]
	}
	wp := pool(w)
	v.WorkerCPUs, v.WorkerMemoryMiB = wp.CPUs, wp.MemoryMiB
	return v
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// Preflight implements platforms.Provisioner.
func (p *Provisioner) Preflight(ctx context.Context, c *platforms.Cluster) error {
	end := p.Env.Progress.Start("Checking the host")
	// A resumed create counts only the machines still to start: the running
	// ones already hold their share of the host's resources.
	want := 1 + c.Config.MasterReplicas() + c.Config.WorkerReplicas()
	running, err := machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log}).List(ctx, c.InfraID+"-")
	if err == nil {
		want = max(want-len(running), 0)
	}
	rep, err := machine.Preflight(ctx, machine.PreflightOptions{Machines: want, StateRoot: p.StateRoot})
	end(err)
	for _, w := range rep.Warnings {
		p.Env.Log.Warn(w)
	}
	for _, n := range rep.Notes {
		p.Env.Log.Info(n)
	}
	if err != nil {
		return graph.WithKind(graph.KindInfrastructure, err)
	}
	if rep.LimitsEnforced {
		p.Env.Log.Infof("Machines run in cgroup mode %s; CPU and memory limits are enforced", rep.Mode)
	} else {
		p.Env.Log.Warnf("Machines run in cgroup mode %s: this host cannot enforce CPU and memory limits", rep.Mode)
	}
	return nil
}

// Provision implements platforms.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, c *platforms.Cluster) error {
	plan, err := NewPlan(c.Config, c.InfraID)
	if err != nil {
		return graph.WithKind(graph.KindInput, err)
	}
	drv, err := p.driver(ctx, c.Dir)
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
		img, err := nodeimage.Ensure(ctx, nodeimage.Options{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress})
		if err != nil {
			return graph.WithKind(graph.KindInfrastructure, err)
		}
		image = img.RootFS
	}
	vars := plan.Vars(c, image, kiln)
	vars.BootstrapInLB = !c.BootstrapDone
	stages := []struct{ name, title string }{
		{terraform.StageNetwork, fmt.Sprintf("Creating bridge %s and the API load balancer on %s", plan.Bridge, plan.VIP)},
		{terraform.StageBootstrap, "Creating the bootstrap machine"},
		{terraform.StageCluster, fmt.Sprintf("Creating %d masters and %d workers", len(plan.Masters), len(plan.Workers))},
	}
	if c.BootstrapDone {
		stages = append(stages[:1], stages[2])
	}
	for _, stage := range stages {
		end := p.Env.Progress.Start(stage.title)
		err := drv.Apply(ctx, stage.name, vars)
		end(err)
		if err != nil {
			return err
		}
	}
	return nil
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
	end := p.Env.Progress.Start("Removing the bootstrap machine from the load balancer")
	err = drv.Apply(ctx, terraform.StageNetwork, vars)
	end(err)
	if err != nil {
		return err
	}
	end = p.Env.Progress.Start("Destroying the bootstrap machine")
	err = drv.Destroy(ctx, terraform.StageBootstrap, vars)
	end(err)
	return err
}

// Destroy implements platforms.Provisioner: the Terraform stages in reverse,
// then, as a safety net that needs no state, every machine, load balancer
// and bridge named after infraID.
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
	return graph.WithKind(graph.KindInfrastructure, errors.Join(errs...))
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
	lbDir := p.LBDir
	if lbDir == "" {
		lbDir = provider.DefaultLBDir
	}
	dir := filepath.Join(lbDir, infraID)
	proc := lb.ProcessIn(p.Env.Kiln, dir)
	if err := proc.Stop(ctx, 10*time.Second); err != nil && !errors.Is(err, lb.ErrNotRunning) {
		errs = append(errs, err)
	}
	errs = append(errs, os.RemoveAll(dir))
	errs = append(errs, machine.DeleteBridge(ctx, machine.ExecRunner{Log: p.Env.Log}, BridgeName(infraID)))
	err = errors.Join(errs...)
	end(err)
	return err
}

// driver returns the Terraform driver of the cluster in dir.
func (p *Provisioner) driver(ctx context.Context, dir string) (*terraform.Driver, error) {
	eng, err := terraform.EnsureEngine(ctx, terraform.BuildOptions{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress})
	if err != nil {
		return nil, err
	}
	modules, err := tfdata.Platform("local")
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return terraform.NewDriver(terraform.DriverOptions{
		Engine:    eng,
		Dir:       abs,
		Modules:   modules,
		Providers: []terraform.Provider{provider.TerraformProvider(p.Env.Kiln, abs)},
		Log:       p.Env.Log,
	}), nil
}

// stageVars reads the variables a stage was last applied with.
func stageVars(drv *terraform.Driver, stage string) (tfdata.LocalVars, error) {
	var v tfdata.LocalVars
	return v, drv.LastVars(stage, &v)
}

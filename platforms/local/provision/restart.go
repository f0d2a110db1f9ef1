package provision

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/lb"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// lbStopTimeout bounds the load balancer's graceful stop.
const lbStopTimeout = 10 * time.Second

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
	for _, n := range nodeMachines(c) {
		st, err := mgr.State(ctx, n)
		if err != nil {
			return nil, err
		}
		states[n] = platforms.MachineState(st) // the same three words
	}
	return states, nil
}

// nodeMachines names the masters and workers of c.
func nodeMachines(c *platforms.Cluster) []string {
	return c.Machines().All()
}

// stopOrder groups the machines named for a stop: workers (stopped
// together), then the bootstrap machine and the masters one at a time,
// the last master last.
func stopOrder(names []string) [][]string {
	var workers, others, masters []string
	for _, n := range names {
		switch {
		case strings.Contains(n, "-worker-"):
			workers = append(workers, n)
		case strings.Contains(n, "-master-"):
			masters = append(masters, n)
		default:
			others = append(others, n)
		}
	}
	var groups [][]string
	if len(workers) > 0 {
		groups = append(groups, workers)
	}
	for _, n := range others {
		groups = append(groups, []string{n})
	}
	slices.SortFunc(masters, func(a, b string) int { // master-10 after master-9
		return cmpIndex(b, a)
	})
	for _, n := range masters {
		groups = append(groups, []string{n})
	}
	return groups
}

// cmpIndex compares machine names by their trailing index, then by name.
func cmpIndex(a, b string) int {
	ia, ib := a[strings.LastIndexByte(a, '-')+1:], b[strings.LastIndexByte(b, '-')+1:]
	if len(ia) != len(ib) {
		return len(ia) - len(ib)
	}
	return strings.Compare(a, b)
}

// Stop implements platforms.Restarter: the workers together, then each
// master alone, waiting until it is down before the next, so etcd never
// loses two members at once while it still has quorum; then the load
// balancer, the LoadBalancer Service controller and the image registry
// (its storage kept). Each machine stops kubelet and its containers before powering
// off, and keeps its disk. Terraform state is left as it is: the next
// Start (or create) sees the stopped machines as drift.
func (p *Provisioner) Stop(ctx context.Context, c *platforms.Cluster) error {
	mgr := p.machines()
	names, err := mgr.List(ctx, c.InfraID+"-")
	if err != nil {
		return err
	}
	for _, group := range stopOrder(names) {
		end := p.Env.Progress.Start("Stopping " + strings.Join(group, ", "))
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, n := range group {
			wg.Go(func() { errs[i] = mgr.Stop(ctx, n) })
		}
		wg.Wait()
		err := errors.Join(errs...)
		end(err)
		if err != nil {
			return err
		}
	}
	if err := p.stopServiceLB(ctx, c.InfraID); err != nil {
		return err
	}
	if err := p.stopRegistry(ctx, c.InfraID); err != nil {
		return err
	}
	end := p.Env.Progress.Start("Stopping the API load balancer")
	err = lb.ProcessIn(p.Env.Kiln, p.lbDir(c.InfraID)).Stop(ctx, lbStopTimeout)
	end(err)
	return err
}

// Start implements platforms.Restarter: the Terraform stages are applied
// again with the variables they were last applied with, so the bridge is
// recreated if it is gone, and the load balancer and every stopped machine
// are started again in place from their disks, then the image registry
// and the LoadBalancer Service controller. The bootstrap stage is
// applied only while the bootstrap machine is still part of the cluster.
func (p *Provisioner) Start(ctx context.Context, c *platforms.Cluster) error {
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return err
	}
	net, err := stageVars(drv, terraform.StageNetwork)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no cluster was provisioned from %s: run `kiln create cluster`", c.Dir)
	}
	if err != nil {
		return err
	}
	stages := []struct{ name, title string }{
		{terraform.StageNetwork, "Starting the bridge and the API load balancer"},
		{terraform.StageBootstrap, "Starting the bootstrap machine"},
		{terraform.StageCluster, "Starting the masters and workers"},
	}
	if !net.BootstrapInLB {
		stages = append(stages[:1], stages[2])
	}
	for _, s := range stages {
		vars, err := stageVars(drv, s.name)
		if err != nil {
			return err
		}
		end := p.Env.Progress.Start(s.title)
		if s.name == terraform.StageCluster {
			err = p.applyCluster(ctx, drv, vars)
		} else {
			err = drv.Apply(ctx, s.name, vars)
		}
		end(err)
		if err != nil {
			return err
		}
	}
	plan, err := NewPlan(c.Config, c.InfraID, c.Machines())
	if err != nil {
		return &platforms.ConfigError{Err: err}
	}
	if err := p.startRegistry(ctx, c); err != nil {
		return err
	}
	return p.startServiceLB(ctx, c, plan, net.KilnBinary)
}

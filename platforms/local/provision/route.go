package provision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// Every change of what the cluster's machines and daemons do - create,
// stop, start, scale, destroy - is a Terraform apply (or destroy) of its
// stages: the variables say which machines exist and whether each machine
// and daemon runs (machine_states, daemon_state), the provider's Update
// starts or stops them in place, and Read reports what they do. So the
// Terraform state always records what runs, a crash is drift that the
// next start applies away, and a stop is no drift at all.

// step is one apply of that route: a stage, the variables it is applied
// with, and the progress line shown meanwhile.
type step struct {
	stage string
	title string
	vars  tfdata.LocalVars
}

// apply runs steps in order, each under its progress line; it stops at the
// first that fails. Each is idempotent, so running the steps again after an
// interruption converges.
func (p *Provisioner) apply(ctx context.Context, drv *terraform.Driver, steps []step) error {
	for _, s := range steps {
		end := p.Env.Progress.Start(s.title)
		var err error
		if s.stage == terraform.StageCluster {
			err = p.applyCluster(ctx, drv, s.vars)
		} else {
			err = drv.Apply(ctx, s.stage, s.vars)
		}
		end(err)
		if err != nil {
			return err
		}
	}
	return nil
}

// stages are the variables of a cluster's stages; a stage that is nil is
// not applied (the bootstrap stage once the bootstrap machine is gone, a
// stage an interrupted create never reached).
type stages struct {
	network            tfdata.LocalVars
	bootstrap, cluster *tfdata.LocalVars
}

// titles are the progress lines of the three stages' applies.
type titles struct {
	network, bootstrap, cluster string
}

// withStates returns v with the named machines in state; the map is a copy,
// so the variables of earlier steps are left as they were.
func withStates(v tfdata.LocalVars, state platforms.MachineState, names ...string) tfdata.LocalVars {
	return v.WithStates(state.String(), names...)
}

// bootstrapMachine is the name of the bootstrap machine of infraID, as the
// bootstrap stage names it.
func bootstrapMachine(infraID string) string {
	return infraID + "-bootstrap"
}

// nodeMachines returns the masters and workers of v.
func nodeMachines(v tfdata.LocalVars) []string {
	return append(slices.Clone(v.MasterNames), v.WorkerNames...)
}

// running returns the steps that make everything of s run: the network
// stage (bridge, API load balancer, image registry), the bootstrap stage, the cluster stage
// (masters and workers together, the LoadBalancer Service controller).
func (s stages) running(t titles) []step {
	on := platforms.MachineRunning
	net := s.network
	net.DaemonState = on.String()
	steps := []step{{terraform.StageNetwork, t.network, net}}
	if b := s.bootstrap; b != nil {
		steps = append(steps, step{terraform.StageBootstrap, t.bootstrap, withStates(*b, on, bootstrapMachine(b.InfraID))})
	}
	if c := s.cluster; c != nil {
		v := withStates(*c, on, nodeMachines(*c)...)
		v.DaemonState = on.String()
		steps = append(steps, step{terraform.StageCluster, t.cluster, v})
	}
	return steps
}

// stopping returns the steps of a clean stop of s: the workers together
// with the LoadBalancer Service controller, then the bootstrap machine,
// then each master alone - the highest index first, each down before the
// next, so etcd never loses two members at once while it has quorum - then
// the API load balancer and the image registry (its storage kept). Each step's variables keep the states of the steps
// before it.
func (s stages) stopping() []step {
	off := platforms.MachineStopped
	var steps []step
	var cluster tfdata.LocalVars
	if c := s.cluster; c != nil {
		cluster = withStates(*c, off, c.WorkerNames...)
		cluster.DaemonState = off.String()
		if len(c.WorkerNames) > 0 || c.ServiceLBPool != nil {
			steps = append(steps, step{terraform.StageCluster, "Stopping " + stopList(cluster), cluster})
		}
	}
	if b := s.bootstrap; b != nil {
		name := bootstrapMachine(b.InfraID)
		steps = append(steps, step{terraform.StageBootstrap, "Stopping " + name, withStates(*b, off, name)})
	}
	if s.cluster != nil {
		for _, m := range lastFirst(cluster.InfraID, cluster.MasterNames) {
			cluster = withStates(cluster, off, m)
			steps = append(steps, step{terraform.StageCluster, "Stopping " + m, cluster})
		}
	}
	net := s.network
	net.DaemonState = off.String()
	title := "Stopping the API load balancer"
	if net.Registry != nil {
		title += " and the image registry"
	}
	return append(steps, step{terraform.StageNetwork, title, net})
}

// stopList names what the first step of a stop stops: the workers of v
// and its LoadBalancer Service controller.
func stopList(v tfdata.LocalVars) string {
	what := slices.Clone(v.WorkerNames)
	if v.ServiceLBPool != nil {
		what = append([]string{"the LoadBalancer Service controller"}, what...)
	}
	return strings.Join(what, ", ")
}

// lastFirst returns the machines of infraID named by names from the highest
// index to the lowest (master-10 before master-9); names that
// carry no index come last, by name.
func lastFirst(infraID string, names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int {
		_, ia, okA := machines.Index(infraID, a)
		_, ib, okB := machines.Index(infraID, b)
		switch {
		case okA && okB:
			return cmp.Or(cmp.Compare(ib, ia), strings.Compare(a, b))
		case okA != okB:
			if okA {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

// lastStages reads the variables each stage of the cluster in dir was last
// applied with: the bootstrap stage only while the bootstrap machine is in
// the load balancer (it is destroyed after), and only stages that were
// applied. A cluster whose network stage was never applied is an error.
func lastStages(drv *terraform.Driver, dir string) (stages, error) {
	net, err := stageVars(drv, terraform.StageNetwork)
	if errors.Is(err, fs.ErrNotExist) {
		return stages{}, fmt.Errorf("no cluster was provisioned from %s: run `kiln create cluster`", dir)
	}
	if err != nil {
		return stages{}, err
	}
	s := stages{network: net}
	if net.BootstrapInLB {
		if s.bootstrap, err = optionalStageVars(drv, terraform.StageBootstrap); err != nil {
			return stages{}, err
		}
	}
	if s.cluster, err = optionalStageVars(drv, terraform.StageCluster); err != nil {
		return stages{}, err
	}
	return s, nil
}

// optionalStageVars returns the last variables of stage, nil for a stage
// never applied.
func optionalStageVars(drv *terraform.Driver, stage string) (*tfdata.LocalVars, error) {
	v, err := stageVars(drv, stage)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// lastStagesOf returns the driver of c's directory and its stages' last
// variables, the cluster stage's LoadBalancer Service variables filled in
// from c (for a cluster created before the controller was a Terraform
// resource).
func (p *Provisioner) lastStagesOf(ctx context.Context, c *platforms.Cluster) (*terraform.Driver, stages, error) {
	plan, drv, err := p.planAndDriver(ctx, c, c.Machines())
	if err != nil {
		return nil, stages{}, err
	}
	s, err := lastStages(drv, c.Dir)
	if err != nil {
		return nil, stages{}, err
	}
	if s.cluster != nil {
		if err := p.setServiceLB(c, plan, s.cluster); err != nil {
			return nil, stages{}, err
		}
	}
	return drv, s, nil
}

// Stop implements platforms.Restarter: the stages applied with the machines
// and daemons stopped, step by step (see stages.stopping). Each machine
// stops kubelet and its containers before powering off, and keeps its
// disk; the Terraform state then records every machine as stopped.
func (p *Provisioner) Stop(ctx context.Context, c *platforms.Cluster) error {
	drv, s, err := p.lastStagesOf(ctx, c)
	if err != nil {
		return err
	}
	return p.apply(ctx, drv, s.stopping())
}

// Start implements platforms.Restarter: the stages applied again with the
// variables they were last applied with, every machine and daemon running:
// the bridge is created again if it is gone, and the load balancers, the
// image registry (with the storage it had) and every stopped machine
// (stopped by kiln stop cluster, a crash or a host reboot) are started
// again in place from their disks. The registry's binary is looked up
// again (setRegistry), so a cache cleaned meanwhile only costs a build.
// The bootstrap stage is applied only while the bootstrap machine is still
// part of the cluster.
func (p *Provisioner) Start(ctx context.Context, c *platforms.Cluster) error {
	drv, s, err := p.lastStagesOf(ctx, c)
	if err != nil {
		return err
	}
	if err := p.setRegistry(ctx, c, &s.network); err != nil {
		return err
	}
	t := titles{
		network:   "Starting the bridge and the API load balancer",
		bootstrap: "Starting the bootstrap machine",
		cluster:   "Starting the masters and workers",
	}
	if s.network.Registry != nil {
		t.network += " and the image registry"
	}
	if s.cluster != nil && s.cluster.ServiceLBPool != nil {
		t.cluster += " and the LoadBalancer Service controller"
	}
	return p.apply(ctx, drv, s.running(t))
}

package provision

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var (
	_ platforms.Restarter     = (*Provisioner)(nil)
	_ platforms.MachineStater = (*Provisioner)(nil)
)

// step is one apply of a stage.
type step struct {
	stage, title string
	vars         tfdata.SSHVars
}

// lastStages reads the variables the stages of the cluster in dir were
// last applied with: the bootstrap stage's only while its host is one
// (nil once it is reset, or never applied), the cluster stage's (nil when
// never applied). A cluster with neither was never provisioned.
func lastStages(dir string) (boot, cluster *tfdata.SSHVars, err error) {
	read := func(stage string) (*tfdata.SSHVars, error) {
		var v tfdata.SSHVars
		err := terraform.LastVars(dir, stage, &v)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
	if boot, err = read(terraform.StageBootstrap); err != nil {
		return nil, nil, err
	}
	if boot != nil && boot.Bootstrap == nil {
		boot = nil
	}
	if cluster, err = read(terraform.StageCluster); err != nil {
		return nil, nil, err
	}
	if boot == nil && cluster == nil {
		return nil, nil, fmt.Errorf("no cluster was provisioned from %s: run `kiln create cluster`", dir)
	}
	return boot, cluster, nil
}

// withState returns v with the hosts named by names in state st ("" is
// running), their lists copied: the steps' variables share nothing.
func withState(v tfdata.SSHVars, st string, names ...string) tfdata.SSHVars {
	set := func(hs []tfdata.SSHHost) []tfdata.SSHHost {
		hs = slices.Clone(hs)
		for i := range hs {
			if slices.Contains(names, hs[i].Name) {
				hs[i].State = st
			}
		}
		return hs
	}
	v.Masters, v.Workers = set(v.Masters), set(v.Workers)
	if v.Bootstrap != nil {
		b := *v.Bootstrap
		if slices.Contains(names, b.Name) {
			b.State = st
		}
		v.Bootstrap = &b
	}
	return v
}

// hostNames returns the names of hs.
func hostNames(hs []tfdata.SSHHost) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	return out
}

// stopping returns the steps of a clean stop: the workers' nodes
// together, then the bootstrap host's, then each master's alone, the last
// listed first, each down before the next, so that etcd never loses two
// members at once while it has quorum. Each step's variables keep the
// states of the steps before it. The hosts' API proxies stop with their
// nodes: they are what serves the API on this platform.
func stopping(boot, cluster *tfdata.SSHVars) []step {
	off := platforms.MachineStopped.String()
	var steps []step
	var v tfdata.SSHVars
	if cluster != nil {
		workers := hostNames(cluster.Workers)
		v = withState(*cluster, off, workers...)
		if len(workers) > 0 {
			steps = append(steps, step{terraform.StageCluster, "Stopping the nodes on " + strings.Join(workers, ", "), v})
		}
	}
	if boot != nil {
		steps = append(steps, step{terraform.StageBootstrap, "Stopping the node on the bootstrap host " + boot.Bootstrap.Name,
			withState(*boot, off, boot.Bootstrap.Name)})
	}
	if cluster != nil {
		masters := hostNames(cluster.Masters)
		slices.Reverse(masters)
		for _, m := range masters {
			v = withState(v, off, m)
			steps = append(steps, step{terraform.StageCluster, "Stopping the node on " + m, v})
		}
	}
	return steps
}

// running returns the steps that start every node again: the bootstrap
// host's while it is one, then the masters' and workers' together (etcd
// needs a quorum of them at once), with the variables a create applies.
func running(boot, cluster *tfdata.SSHVars) []step {
	var steps []step
	if boot != nil {
		b := *boot.Bootstrap
		steps = append(steps, step{terraform.StageBootstrap, "Starting the node on the bootstrap host " + b.Name,
			withState(*boot, "", b.Name)})
	}
	if cluster != nil {
		all := slices.Concat(hostNames(cluster.Masters), hostNames(cluster.Workers))
		steps = append(steps, step{terraform.StageCluster,
			fmt.Sprintf("Starting the nodes on %d masters and %d workers", len(cluster.Masters), len(cluster.Workers)),
			withState(*cluster, "", all...)})
	}
	return steps
}

// Stop implements platforms.Restarter: the nodes on the hosts stop, step
// by step (stopping), through the stages' kilnssh_host state; the hosts
// run on, and keep everything kiln put there. A node stays stopped when
// its host reboots.
func (p *Provisioner) Stop(ctx context.Context, c *platforms.Cluster) error {
	return p.applyLast(ctx, c.Dir, stopping)
}

// Start implements platforms.Restarter: the stages applied with every
// host running (running), so each host whose node kiln stopped (Read
// finds the record's list) starts it again. A host whose node runs is
// left as it is: a unit that died there is systemd's to restart.
func (p *Provisioner) Start(ctx context.Context, c *platforms.Cluster) error {
	return p.applyLast(ctx, c.Dir, running)
}

// applyLast applies the steps that steps returns for the variables the
// stages of the cluster in dir were last applied with.
func (p *Provisioner) applyLast(ctx context.Context, dir string, steps func(boot, cluster *tfdata.SSHVars) []step) error {
	boot, cluster, err := lastStages(dir)
	if err != nil {
		return err
	}
	drv, err := p.driver(ctx, dir)
	if err != nil {
		return err
	}
	return p.applySteps(ctx, drv, steps(boot, cluster))
}

// applySteps applies steps in order, each with its progress line.
func (p *Provisioner) applySteps(ctx context.Context, drv *terraform.Driver, steps []step) error {
	for _, s := range steps {
		end := p.Env.Progress.Start(s.title)
		err := drv.Apply(ctx, s.stage, s.vars)
		end(err)
		if err != nil {
			return err
		}
	}
	return nil
}

// MachineStates implements platforms.MachineStater from what kiln last
// applied, read from --dir without asking the hosts (the waits ask every
// few seconds, and a host that does not answer SSH for a moment must not
// end an install): a master or worker whose node kiln stopped is
// stopped, one installed running, and one not installed yet absent. A
// node that dies otherwise (its host powered off) shows in its kubelet's
// Lease, which the waits read.
func (p *Provisioner) MachineStates(_ context.Context, c *platforms.Cluster) (map[string]platforms.MachineState, error) {
	var v tfdata.SSHVars
	err := terraform.LastVars(c.Dir, terraform.StageCluster, &v)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	states := map[string]platforms.MachineState{}
	for _, n := range c.Machines().All() {
		states[n] = platforms.MachineAbsent
	}
	for _, h := range slices.Concat(v.Masters, v.Workers) {
		if _, ok := states[h.Name]; !ok {
			continue
		}
		st := platforms.MachineRunning
		if h.State != "" {
			if st, err = platforms.ParseDesiredState(h.State); err != nil {
				return nil, fmt.Errorf("host %s: %w", h.Name, err)
			}
		}
		states[h.Name] = st
	}
	return states, nil
}

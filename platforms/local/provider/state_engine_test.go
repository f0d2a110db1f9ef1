package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// clusterVars are variables of the cluster stage with two masters, a
// worker and the LoadBalancer Service controller, whose files go to lbDir.
func clusterVars(lbDir string) tfdata.LocalVars {
	return tfdata.LocalVars{
		ClusterName: "demo", BaseDomain: "example.test", InfraID: "demo-x7k2p",
		Bridge: "kiln-demo", MachineCIDR: "10.66.0.0/24", APIVIP: "10.66.0.1",
		NodeImage: "/images/node", KilnBinary: "/usr/local/bin/kiln", LBDir: &lbDir,
		BootstrapIgnition: "{}", MasterIgnition: "{}", WorkerIgnition: "{}", BootstrapAddress: "10.66.0.10",
		MasterNames: []string{"demo-x7k2p-master-0", "demo-x7k2p-master-1"}, MasterAddresses: []string{"10.66.0.11", "10.66.0.12"},
		WorkerNames: []string{"demo-x7k2p-worker-0"}, WorkerAddresses: []string{"10.66.0.21"},
		ServiceLBPool:       &tfdata.AddressRange{First: "10.66.0.192", Last: "10.66.0.254"},
		ServiceLBKubeconfig: "apiVersion: v1\n",
	}
}

// with returns v with the named machines in state.
func with(v tfdata.LocalVars, state platforms.MachineState, names ...string) tfdata.LocalVars {
	return v.WithStates(state.String(), names...)
}

// TestStateRouteThroughEngine applies the cluster stage as kiln stop and
// start cluster do, with a real engine and this provider over a fake host:
// machine_states and daemon_state stop and start the machines and the
// LoadBalancer Service controller in place, a plan after each apply shows
// no drift (the state records what runs), a crash is drift that an apply
// starts again, a scale updates the controller's machines in place, a state
// written by the provider before state existed (running, version 0) is
// upgraded without a change, a bad state is refused before anything runs,
// and destroy removes the controller's files.
func TestStateRouteThroughEngine(t *testing.T) {
	fake := fakeHost{dir: t.TempDir()}
	d := engineDriver(t, fake)
	lbDir := t.TempDir()
	vars := clusterVars(lbDir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	apply := func(v tfdata.LocalVars) []string {
		t.Helper()
		before := len(fake.ops())
		start := time.Now()
		if err := d.Apply(ctx, tf.StageCluster, v); err != nil {
			t.Fatal(err)
		}
		t.Logf("MEASURE apply of the cluster stage: %s", time.Since(start).Round(time.Millisecond))
		return fake.ops()[before:]
	}
	noDrift := func(v tfdata.LocalVars, when string) {
		t.Helper()
		if got, err := d.Plan(ctx, tf.StageCluster, v); err != nil || len(got) != 0 {
			t.Errorf("plan %s = %q, %v; want no change", when, got, err)
		}
	}
	state := func(name string) machine.State {
		st, err := fake.State(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	proc := servicelb.Process(testBinary(t), filepath.Join(lbDir, "demo-x7k2p"))
	t.Cleanup(func() {
		d.Destroy(context.Background(), tf.StageCluster, vars)
		proc.Stop(context.Background(), time.Second)
	})

	apply(vars)
	pid, err := proc.PID()
	if err != nil {
		t.Fatalf("LoadBalancer Service controller: %v", err)
	}
	cfg := readServiceLB(t, lbDir)
	if got, want := cfg.Machines.String(), "demo-x7k2p-master-0=10.66.0.11, demo-x7k2p-master-1=10.66.0.12, demo-x7k2p-worker-0=10.66.0.21"; got != want {
		t.Errorf("controller's machines = %s, want %s", got, want)
	}
	if cfg.Pool.String() != "10.66.0.192-10.66.0.254" || cfg.Bridge != "kiln-demo" || cfg.Machines.Host.String() != "10.66.0.1" {
		t.Errorf("controller's configuration = %+v", cfg)
	}
	if st, err := os.Stat(cfg.Kubeconfig); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("controller's kubeconfig: %v, %v; want mode 0600", st, err)
	}

	// kiln stop cluster: the worker and the controller, then each master.
	off := platforms.MachineStopped
	step := with(vars, off, "demo-x7k2p-worker-0")
	step.DaemonState = off.String()
	if got, want := apply(step), []string{"stop:demo-x7k2p-worker-0"}; !slices.Equal(got, want) {
		t.Errorf("first stop step: operations %q, want %q", got, want)
	}
	if _, err := proc.PID(); err == nil {
		t.Error("LoadBalancer Service controller runs after daemon_state = stopped")
	}
	noDrift(step, "after the first stop step")
	for _, m := range []string{"demo-x7k2p-master-1", "demo-x7k2p-master-0"} {
		step = with(step, off, m)
		if got := apply(step); !slices.Equal(got, []string{"stop:" + m}) {
			t.Errorf("stopping %s: operations %q", m, got)
		}
		if state(m) != machine.StateStopped {
			t.Errorf("%s is %s after its stop step", m, state(m))
		}
		noDrift(step, "after stopping "+m)
	}
	if _, err := os.Stat(filepath.Join(lbDir, "demo-x7k2p", servicelb.ConfigFile)); err != nil {
		t.Errorf("stopped controller lost its configuration: %v", err)
	}

	// kiln start cluster: everything runs again, from the same disks.
	running := with(vars, platforms.MachineRunning, "demo-x7k2p-master-0", "demo-x7k2p-master-1", "demo-x7k2p-worker-0")
	running.DaemonState = platforms.MachineRunning.String()
	got := apply(running)
	slices.Sort(got)
	if want := []string{"start:demo-x7k2p-master-0", "start:demo-x7k2p-master-1", "start:demo-x7k2p-worker-0"}; !slices.Equal(got, want) {
		t.Errorf("start: operations %q, want %q", got, want)
	}
	if pid, err = proc.PID(); err != nil {
		t.Fatalf("controller after start: %v", err)
	}
	noDrift(running, "after start")

	// A crash: a stopped master and a dead controller are drift.
	if err := fake.stop("demo-x7k2p-master-1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, proc)
	plan, err := d.Plan(ctx, tf.StageCluster, running)
	if err != nil {
		t.Fatal(err)
	}
	wantPlan := map[string][]string{
		`kilnlocal_machine.master["demo-x7k2p-master-1"]`: {"update"},
		"kilnlocal_service_load_balancer.services[0]":     {"update"},
	}
	if !reflect.DeepEqual(plan, wantPlan) {
		t.Errorf("plan after a crash = %q, want %q", plan, wantPlan)
	}
	if got := apply(running); !slices.Equal(got, []string{"start:demo-x7k2p-master-1"}) {
		t.Errorf("start after a crash: operations %q", got)
	}
	if pid, err = proc.PID(); err != nil {
		t.Fatalf("controller after the crash's start: %v", err)
	}

	// A scale: a new worker is created and the running controller gets
	// the new list in place.
	scaled := running
	scaled.WorkerNames = append(slices.Clone(running.WorkerNames), "demo-x7k2p-worker-1")
	scaled.WorkerAddresses = append(slices.Clone(running.WorkerAddresses), "10.66.0.22")
	if got := apply(scaled); !slices.Equal(got, []string{"create:demo-x7k2p-worker-1"}) {
		t.Errorf("scale: operations %q", got)
	}
	if got, err := proc.PID(); err != nil || got != pid {
		t.Errorf("controller after the scale: pid %d, %v; want the same process %d", got, err, pid)
	}
	if cfg := readServiceLB(t, lbDir); cfg.Machines.Addresses["demo-x7k2p-worker-1"].String() != "10.66.0.22" {
		t.Errorf("controller's machines after the scale: %s", cfg.Machines)
	}

	// A state written before machines had state (version 0, running =
	// true) is upgraded by the provider, and nothing changes.
	downgradeState(t, filepath.Join(d.StageDir(tf.StageCluster), "terraform.tfstate"))
	noDrift(scaled, "of a version-0 state")
	if got := apply(scaled); len(got) != 0 {
		t.Errorf("apply of a version-0 state: operations %q, want none", got)
	}
	for _, m := range stateMachines(t, d) {
		if m.SchemaVersion != stateSchemaVersion || m.Attributes["state"] != "running" || m.Attributes["running"] != nil {
			t.Errorf("machine %s after an apply of a version-0 state: version %d, state %v, running %v", m.Name, m.SchemaVersion, m.Attributes["state"], m.Attributes["running"])
		}
	}

	// A state that is not running or stopped is refused before anything
	// is done.
	before := len(fake.ops())
	if err := d.Apply(ctx, tf.StageCluster, with(scaled, platforms.MachineAbsent, "demo-x7k2p-master-0")); err == nil {
		t.Error("apply with machine_states = absent succeeded")
	}
	if got := fake.ops()[before:]; len(got) != 0 {
		t.Errorf("apply with a bad state did %q", got)
	}

	if err := d.Destroy(ctx, tf.StageCluster, scaled); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.PID(); err == nil {
		t.Error("controller runs after destroy")
	}
	for _, f := range []string{servicelb.ConfigFile, servicelb.KubeconfigFile} {
		if _, err := os.Stat(filepath.Join(lbDir, "demo-x7k2p", f)); err == nil {
			t.Errorf("%s left after destroy", f)
		}
	}
}

// readServiceLB reads the controller's configuration in lbDir.
func readServiceLB(t *testing.T, lbDir string) servicelb.Config {
	t.Helper()
	cfg, err := servicelb.LoadConfig(filepath.Join(lbDir, "demo-x7k2p", servicelb.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stateMachines returns the machines the cluster stage's state records.
func stateMachines(t *testing.T, d *tf.Driver) []tf.Instance {
	t.Helper()
	in, err := d.Instances(tf.StageCluster)
	if err != nil {
		t.Fatal(err)
	}
	var out []tf.Instance
	for _, i := range in {
		if strings.HasPrefix(i.Resource, "kilnlocal_machine.") {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		t.Fatal("no machine in the state")
	}
	return out
}

// downgradeState rewrites the machines of a state file as the provider
// wrote them before they had state: schema version 0, running = true.
func downgradeState(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range st["resources"].([]any) {
		res := r.(map[string]any)
		if res["type"] != "kilnlocal_machine" {
			continue
		}
		for _, in := range res["instances"].([]any) {
			inst := in.(map[string]any)
			attrs := inst["attributes"].(map[string]any)
			delete(attrs, "state")
			attrs["running"] = true
			inst["schema_version"] = 0
			n++
		}
	}
	if n == 0 {
		t.Fatal("no machine in the state")
	}
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkApplyState measures what the route costs over calling the
// machine manager directly: each iteration applies the cluster stage twice,
// stopping one master of the fake host and starting it again. An apply is
// kiln's whole Terraform overhead (init, refresh, plan, apply, the provider
// started by the engine); the fake's stop and start take microseconds, a
// real machine's stop seconds (docs/benchmarks.md).
func BenchmarkApplyState(b *testing.B) {
	fake := fakeHost{dir: b.TempDir()}
	d := engineDriver(b, fake)
	vars := clusterVars(b.TempDir())
	vars.ServiceLBPool = nil
	ctx := context.Background()
	if err := d.Apply(ctx, tf.StageCluster, vars); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Destroy(context.Background(), tf.StageCluster, vars) })
	stopped := with(vars, platforms.MachineStopped, "demo-x7k2p-master-1")
	b.ResetTimer()
	for range b.N {
		for _, v := range []tfdata.LocalVars{stopped, vars} {
			if err := d.Apply(ctx, tf.StageCluster, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if n := len(fake.ops()); n < 2*b.N {
		b.Fatalf("%d machine operations for %d stops and starts", n, b.N)
	}
}

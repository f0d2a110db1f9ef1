package provision

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// hostStates returns "name=state" of every host of v, bootstrap first;
// "" is running.
func hostStates(v tfdata.SSHVars) string {
	var out []string
	if v.Bootstrap != nil {
		out = append(out, v.Bootstrap.Name+"="+v.Bootstrap.State)
	}
	for _, h := range append(v.Masters, v.Workers...) {
		out = append(out, h.Name+"="+h.State)
	}
	return strings.Join(out, " ")
}

// exampleStages are the stages' last variables of the example cluster
// before bootstrap-complete, with a second worker.
func exampleStages(t *testing.T) (boot, cluster *tfdata.SSHVars) {
	t.Helper()
	v, err := Vars(exampleCluster(t), "/cache/kiln-v1")
	if err != nil {
		t.Fatal(err)
	}
	v.Workers = append(v.Workers, tfdata.SSHHost{Name: "node6", Address: "192.168.10.16", IP: "192.168.10.16"})
	b, c := v, v
	return &b, &c
}

// TestStopping: the workers together, the bootstrap host, then each
// master alone, the last listed first; each step keeps the states of the
// steps before it, and no step's variables change another's.
func TestStopping(t *testing.T) {
	boot, cluster := exampleStages(t)
	steps := stopping(boot, cluster)
	want := []struct{ stage, title, states string }{
		{terraform.StageCluster, "Stopping the nodes on node5, node6", "node1= node2= node3= node4= node5=stopped node6=stopped"},
		{terraform.StageBootstrap, "Stopping the node on the bootstrap host node1", "node1=stopped node2= node3= node4= node5= node6="},
		{terraform.StageCluster, "Stopping the node on node4", "node1= node2= node3= node4=stopped node5=stopped node6=stopped"},
		{terraform.StageCluster, "Stopping the node on node3", "node1= node2= node3=stopped node4=stopped node5=stopped node6=stopped"},
		{terraform.StageCluster, "Stopping the node on node2", "node1= node2=stopped node3=stopped node4=stopped node5=stopped node6=stopped"},
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(steps), len(want), steps)
	}
	for i, w := range want {
		s := steps[i]
		if s.stage != w.stage || s.title != w.title || hostStates(s.vars) != w.states {
			t.Errorf("step %d: %s %q %q\nwant %s %q %q", i, s.stage, s.title, hostStates(s.vars), w.stage, w.title, w.states)
		}
	}
	if got := hostStates(*cluster); got != "node1= node2= node3= node4= node5= node6=" {
		t.Errorf("the last variables changed: %s", got)
	}

	// After bootstrap-complete: no bootstrap step; a cluster without
	// workers starts with its masters.
	cluster.Workers = nil
	steps = stopping(nil, cluster)
	if len(steps) != 3 || steps[0].title != "Stopping the node on node4" {
		t.Errorf("steps without bootstrap host and workers: %+v", steps)
	}
}

// TestRunning: the bootstrap host, then every master and worker at once,
// with the variables a create applies (no state: running).
func TestRunning(t *testing.T) {
	boot, cluster := exampleStages(t)
	last := stopping(boot, cluster)
	stoppedCluster := last[len(last)-1].vars
	stoppedBoot := last[1].vars
	steps := running(&stoppedBoot, &stoppedCluster)
	if len(steps) != 2 || steps[0].stage != terraform.StageBootstrap || steps[1].stage != terraform.StageCluster ||
		steps[1].title != "Starting the nodes on 3 masters and 2 workers" {
		t.Fatalf("steps %+v", steps)
	}
	for _, s := range steps {
		if got := hostStates(s.vars); strings.Contains(got, "stopped") {
			t.Errorf("%s starts with %s", s.stage, got)
		}
	}
	if !reflect.DeepEqual(steps[1].vars, *cluster) {
		t.Error("start's cluster variables are not the ones create applied")
	}
}

// TestMachineStates reads the states from the cluster stage's last
// variables in --dir: stopped as kiln stop left them, running otherwise,
// absent before the stage was applied or for a host it does not have.
func TestMachineStates(t *testing.T) {
	c := exampleCluster(t)
	c.Dir = t.TempDir()
	p := &Provisioner{}
	got, err := p.MachineStates(context.Background(), c)
	want := map[string]platforms.MachineState{"node2": "absent", "node3": "absent", "node4": "absent", "node5": "absent"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("before any apply: %v, %v; want %v", got, err, want)
	}
	_, cluster := exampleStages(t)
	v := withState(*cluster, "stopped", "node3", "node5")
	v.Masters = v.Masters[:2] // node4 not installed yet
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(c.Dir, ".kiln", "terraform", terraform.StageCluster, "kiln.tfvars.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = p.MachineStates(context.Background(), c)
	want = map[string]platforms.MachineState{"node2": "running", "node3": "stopped", "node4": "absent", "node5": "stopped"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("after a stop: %v, %v; want %v", got, err, want)
	}
	v.Masters[0].State = "paused"
	data, _ = json.Marshal(v)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := p.MachineStates(context.Background(), c); err == nil || !strings.Contains(err.Error(), "host node2") {
		t.Errorf("a state that is none: %v, %v; want an error naming the host", got, err)
	}
}

// TestStopWithoutCluster: a --dir never provisioned has nothing to stop.
func TestStopWithoutCluster(t *testing.T) {
	if _, _, err := lastStages(t.TempDir()); err == nil || !strings.Contains(err.Error(), "run `kiln create cluster`") {
		t.Errorf("lastStages of an empty --dir: %v", err)
	}
}
